//! Step 1 of 3: the attribute's tokens into `key = value` pairs, nothing
//! judged yet (unknown keys and bad values are `validate`'s to report, all
//! at once).

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, Ident};

/// One `key = value` (or a bare `key`) of `#[retry(...)]`.
pub struct Arg {
    pub key: Ident,
    pub value: Option<Expr>,
}

/// Splits `max_attempts = 4, base = "200ms"` into its pairs. Only a syntax
/// error (no key, a stray token) stops here.
pub fn args(tokens: TokenStream) -> syn::Result<Vec<Arg>> {
    let mut args = Vec::new();
    if tokens.is_empty() {
        return Ok(args);
    }
    let parser = syn::meta::parser(|meta: ParseNestedMeta| {
        let key = match meta.path.get_ident() {
            Some(ident) => ident.clone(),
            None => {
                return Err(meta.error("expected a key: `max_attempts`, `base`, `max` or `crate`"))
            }
        };
        let value = if meta.input.peek(syn::Token![=]) {
            Some(meta.value()?.parse::<Expr>()?)
        } else {
            None
        };
        args.push(Arg { key, value });
        Ok(())
    });
    parser.parse2(tokens)?;
    Ok(args)
}
