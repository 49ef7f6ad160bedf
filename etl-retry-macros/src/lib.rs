//! `#[retry]`: an `async fn` whose body is retried by `etl_core::with_retry`,
//! with the policy checked and computed at compile time.
//!
//! Use it through etl-core (`etl_core::retry`, default feature `macros`);
//! the docs there show every key and the code it stands for.
//!
//! The macro works in three steps kept apart: `parse` splits the attribute
//! into pairs, `validate` and `signature` judge them and the function
//! (collecting every error), `expand` writes the code.

mod errors;
mod expand;
mod parse;
mod signature;
mod validate;

use proc_macro::TokenStream;

/// Retries an `async fn` returning `Result<T, E>` (`E: RetryableError`, such as `EtlError`) with capped
/// exponential backoff. See `etl_core::retry` for the full documentation.
#[proc_macro_attribute]
pub fn retry(attr: TokenStream, item: TokenStream) -> TokenStream {
    retry2(attr.into(), item.into()).into()
}

fn retry2(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = errors::Errors::default();
    let mut function = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(e) => {
            // Not a fn: say so, and keep the item so no second error about
            // it going missing follows.
            let e = syn::Error::new(
                e.span(),
                format!("#[retry] goes on a fn (`async` or blocking): {e}"),
            );
            return quote::quote!(#item)
                .into_iter()
                .chain(e.into_compile_error())
                .collect();
        }
    };
    let policy = match parse::args(attr) {
        Ok(args) => validate::policy(args, &mut errors),
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let plan = signature::plan(&mut function.sig, &mut errors);
    if let (Some(policy), Some(plan)) = (&policy, &plan) {
        validate::fits(policy, plan, &mut errors);
    }
    match (policy, plan) {
        (Some(policy), Some(plan)) if errors.is_empty() => expand::retry(&policy, &plan, &function),
        // On error, emit the fn unchanged beside the errors: callers still
        // type-check, so only the attribute's own errors are shown.
        _ => {
            let original: syn::ItemFn = syn::parse2(item.clone()).unwrap_or(function);
            let mut out = quote::quote!(#original);
            out.extend(errors.into_compile_errors());
            out
        }
    }
}
