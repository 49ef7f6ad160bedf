//! [`Location`]: where a table lives, a local directory or an object
//! storage URL, checked before anything is requested.

use deltalake::ObjectStore;
use etl_core::EtlError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use url::Url;

/// The environment variables an `s3://` table needs, as delta-rs reads them:
/// the credentials, and an endpoint or a region.
const S3_CREDENTIALS: [&str; 2] = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
/// Where credentials come from other than a key pair: a profile, a web
/// identity (EKS), a container's credentials endpoint (ECS).
const S3_CREDENTIAL_SOURCES: [&str; 4] = [
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
];
const S3_PLACE: [&str; 3] = ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"];

/// A table's place: the URL delta-rs opens, and the text errors name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    /// A `file://` URL of a directory, or an `s3://` URL.
    pub url: Url,
    /// What the user wrote, for messages (never holds a secret: those come
    /// from the environment).
    pub shown: String,
}

impl Location {
    /// Parses and checks `text`: an `s3://BUCKET/PATH` URL, or a local
    /// directory ([`Location::prepare`] makes it). An `s3://` URL without a
    /// bucket, or without credentials and an endpoint or region in the
    /// environment: an `InvalidInput` naming the place. Changes nothing.
    pub fn parse(text: &str) -> Result<Self, EtlError> {
        if text.is_empty() {
            return Err(EtlError::InvalidInput(
                "Delta table: the location is empty".into(),
            ));
        }
        match text.split_once("://") {
            Some(("s3" | "s3a", _)) => Self::s3(text),
            Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric()) => {
                Err(EtlError::InvalidInput(format!(
                    "Delta table {text}: `{scheme}://` is not supported (a local directory or s3://BUCKET/PATH)"
                )))
            }
            _ => Self::local(text),
        }
    }

    fn s3(text: &str) -> Result<Self, EtlError> {
        let url = Url::parse(text)
            .map_err(|e| EtlError::InvalidInput(format!("Delta table {text}: not a URL: {e}")))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {text}: no bucket (s3://BUCKET/PATH)"
            )));
        }
        if !cfg!(feature = "s3") {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {text}: this build has no S3 support (etl-delta's feature `s3`)"
            )));
        }
        let set = |name: &&str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        let missing: Vec<&str> = S3_CREDENTIALS
            .iter()
            .filter(|name| !set(name))
            .copied()
            .collect();
        if !missing.is_empty() && !S3_CREDENTIAL_SOURCES.iter().any(set) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {text}: no S3 credentials: set {} (or one of {})",
                missing.join(" and "),
                S3_CREDENTIAL_SOURCES.join(", ")
            )));
        }
        if !S3_PLACE.iter().any(set) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {text}: no S3 endpoint or region: set {}",
                S3_PLACE.join(" or ")
            )));
        }
        Ok(Location {
            url,
            shown: text.to_string(),
        })
    }

    fn local(text: &str) -> Result<Self, EtlError> {
        let invalid = |why: String| EtlError::InvalidInput(format!("Delta table {text}: {why}"));
        let absolute = std::path::absolute(text).map_err(|e| invalid(e.to_string()))?;
        let url = Url::from_directory_path(&absolute)
            .map_err(|()| invalid("not an absolute directory path".into()))?;
        Ok(Location {
            url,
            shown: text.to_string(),
        })
    }

    /// Makes a local table's directory if missing and checks that it can
    /// be written: a path that is a file, or a directory that cannot be
    /// made or written, is an `InvalidInput` naming it. Nothing to do for
    /// object storage, whose errors come with the first request.
    pub fn prepare(&self) -> Result<(), EtlError> {
        if self.url.scheme() != "file" {
            return Ok(());
        }
        let text = &self.shown;
        let invalid = |why: String| EtlError::InvalidInput(format!("Delta table {text}: {why}"));
        // Without the directory URL's trailing `/`, which would make a file
        // at the path look absent.
        let path: PathBuf = self
            .url
            .to_file_path()
            .map_err(|()| invalid("not a local path".into()))?
            .components()
            .collect();
        if path.exists() && !path.is_dir() {
            return Err(invalid("not a directory".into()));
        }
        std::fs::create_dir_all(&path).map_err(|e| invalid(format!("cannot be made: {e}")))?;
        check_writable(&path).map_err(|e| invalid(format!("cannot be written: {e}")))
    }

    /// The place of this table's rejects table: the same name with
    /// `_rejects` added (`out/launches` -> `out/launches_rejects`).
    pub fn rejects(&self) -> Result<Self, EtlError> {
        self.beside("_rejects")
    }

    /// Whether a table may be here: a local directory with a Delta log,
    /// or any place on object storage (where only opening finds out). A
    /// table read only if it exists is not made by looking.
    pub fn holds_table(&self) -> bool {
        match self.url.to_file_path() {
            Ok(dir) => dir.join("_delta_log").is_dir(),
            Err(()) => true,
        }
    }

    /// A table beside this one, its name this one's with `suffix` added:
    /// never inside this table's directory, where a VACUUM would delete it.
    pub fn beside(&self, suffix: &str) -> Result<Self, EtlError> {
        let trimmed = self.shown.trim_end_matches('/');
        Self::parse(&format!("{trimmed}{suffix}"))
    }

    /// A table in the directory `dir` inside this one: a replace's staging
    /// table, whose files the table's own log then takes as they are.
    pub fn inside(&self, dir: &str) -> Result<Self, EtlError> {
        let trimmed = self.shown.trim_end_matches('/');
        Self::parse(&format!("{trimmed}/{dir}"))
    }

    /// The directory this table is in and the table's own name in it
    /// (`lake/items` -> `lake`, `items`); `None` for a table at a bucket's
    /// root, which has no directory of its own to look around in.
    pub fn parent(&self) -> Option<(Self, String)> {
        let trimmed = self.shown.trim_end_matches('/');
        if self.url.scheme() == "file" {
            let path = self.url.to_file_path().ok()?;
            let name = path.file_name()?.to_str()?.to_owned();
            let url = Url::from_directory_path(path.parent()?).ok()?;
            let shown = match trimmed.rsplit_once('/') {
                Some((dir, _)) => dir.to_owned(),
                None => ".".to_owned(),
            };
            return Some((Location { url, shown }, name));
        }
        let (dir, name) = trimmed.rsplit_once('/')?;
        if dir.ends_with(':') || dir.ends_with(":/") {
            return None;
        }
        Some((Self::parse(dir).ok()?, name.to_owned()))
    }

    /// The object store below this place, as delta-rs reaches it (the
    /// environment's credentials and endpoint for `s3://`); no request is
    /// made.
    pub fn store(&self) -> Result<Arc<dyn ObjectStore>, EtlError> {
        let built = deltalake::DeltaTableBuilder::from_url(self.url.clone())
            .and_then(deltalake::DeltaTableBuilder::build)
            .map_err(|e| crate::errors::from_delta(e, "opening", &self.shown))?;
        Ok(built.object_store())
    }
}

/// Creates and removes a file in `dir`: the one sure test of a
/// directory's write permission (the mode bits do not tell for root).
fn check_writable(dir: &Path) -> std::io::Result<()> {
    // Unique within the process too: sinks opened at once must not remove
    // each other's probe.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let probe: PathBuf = dir.join(format!(".etl-delta-probe-{}-{n}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_is_made_and_named_by_a_file_url() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("t");
        let loc = Location::parse(at.to_str().unwrap()).unwrap();
        assert!(!at.exists(), "parsing changes nothing");
        loc.prepare().unwrap();
        assert!(at.is_dir());
        assert_eq!(loc.url.scheme(), "file");
        assert!(loc.url.path().ends_with("/t/"), "{}", loc.url);
        let rejects = loc.rejects().unwrap();
        assert!(rejects.shown.ends_with("t_rejects"), "{}", rejects.shown);
    }

    #[test]
    fn a_file_is_not_a_table_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = Location::parse(file.to_str().unwrap())
            .and_then(|l| l.prepare())
            .unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        assert!(e.to_string().contains(file.to_str().unwrap()), "{e}");
    }

    #[test]
    fn other_schemes_and_empty_locations_are_refused() {
        let e = Location::parse("gs://bucket/t").unwrap_err();
        assert!(e.to_string().contains("gs://"), "{e}");
        assert!(Location::parse("").is_err());
        let e = Location::parse("s3:///t").unwrap_err();
        assert!(e.to_string().contains("bucket"), "{e}");
    }
}
