//! Step 3 of 3: the code. The body stays inside the same fn (so `self`,
//! generics, `Self` and `where` clauses keep working) and runs once per
//! attempt inside `with_retry`; the policy is a constant.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ItemFn;

use crate::signature::{Plan, Shape};
use crate::validate::Policy;

pub fn retry(policy: &Policy, plan: &Plan, item: &ItemFn) -> TokenStream {
    let ItemFn { attrs, vis, sig, block, .. } = item;
    let krate = &policy.krate;
    // Mixed-site: names the user's code cannot see or clash with.
    let policy_var = syn::Ident::new("__retry_policy", Span::mixed_site());
    let attempt_var = syn::Ident::new("__retry_attempt", Span::mixed_site());
    let result_var = syn::Ident::new("__retry_result", Span::mixed_site());

    let max_attempts = policy.max_attempts;
    let duration = |d: std::time::Duration| {
        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
        quote!(::core::time::Duration::new(#secs, #nanos))
    };
    let (base, max) = (duration(policy.base), duration(policy.max));

    // Each attempt gets its own copy of every argument. Spanned at the
    // argument, so "not Clone" points there.
    let clones = plan.args.iter().map(|arg| {
        let (source, binding) = (&arg.source, &arg.binding);
        quote_spanned! {arg.span=>
            let #binding = #krate::__private::RetryArg::__retry_clone(&#source);
        }
    });

    let attempt = match &plan.shape {
        Shape::Async { output } => quote! {
            // The declared type on the result makes `?` and type errors in
            // the body resolve (and point) as they would without the macro.
            #[allow(unreachable_code, clippy::let_and_return, clippy::needless_return, clippy::diverging_sub_expression)]
            let #attempt_var = async move {
                let #result_var: #output = #block;
                #result_var
            };
            #attempt_var
        },
        // `#[async_trait]` turned the body into an expression building a
        // boxed future: building it again is one more attempt.
        Shape::AsyncTrait => quote!(#block),
    };

    let call = quote! {
        #krate::__private::with_retry(#policy_var, move || {
            #(#clones)*
            #attempt
        })
    };
    let body = match &plan.shape {
        Shape::Async { .. } => quote!(#call.await),
        Shape::AsyncTrait => quote!(::std::boxed::Box::pin(#call)),
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            let #policy_var = #krate::RetryPolicy {
                max_attempts: #max_attempts,
                base_delay: #base,
                max_delay: #max,
            };
            #body
        }
    }
}
