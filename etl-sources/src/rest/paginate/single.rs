//! One page: a pipeline file with no `[paginate]` table.

use etl_core::EtlError;
use url::Url;

use super::{Page, Paginator, Request};

/// The first page is the only one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Single;

impl Paginator for Single {
    fn first(&mut self, base: &Url) -> Request {
        Request::to(base.clone())
    }

    fn next(&mut self, _page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        Ok(None)
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}
