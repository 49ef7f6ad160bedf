//! Errors collected, not thrown: every misuse of one attribute is reported in
//! one compile, each on its own tokens (serde_derive's `Ctxt`, smaller).

use proc_macro2::TokenStream;

#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// `compile_error!`s for everything collected, or nothing.
    pub fn into_compile_errors(self) -> TokenStream {
        self.0
            .map(syn::Error::into_compile_error)
            .unwrap_or_default()
    }
}
