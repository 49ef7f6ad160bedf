//! Step 3 of 3: the code. The body stays inside the same fn (so `self`,
//! generics, `Self` and `where` clauses keep working) and runs once per
//! attempt inside `with_retry`; the policy is a constant.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::ItemFn;

use crate::signature::{Plan, Shape};
use crate::validate::Policy;

pub fn retry(policy: &Policy, plan: &Plan, item: &ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
        ..
    } = item;
    let krate = &policy.krate;
    // Where a wrong return type is reported, once: at the return type.
    let output_span = match &plan.shape {
        Shape::Async { output } | Shape::Blocking { output } => output.span(),
        Shape::AsyncTrait => Span::call_site(),
    };
    let options = &policy.options;
    // With `when`, the error needs no `RetryableError` impl: the return type
    // is checked against the trait that does not ask for one.
    let output_trait = if options.when.is_some() {
        quote!(RetryOutputAny)
    } else {
        quote!(RetryOutput)
    };
    // Mixed-site: names the user's code cannot see or clash with. Those
    // whose types carry the return type are located at it, so that a wrong
    // return type is not reported a second time at the attribute.
    let hidden = |name: &str, at: Span| syn::Ident::new(name, Span::mixed_site().located_at(at));
    let krate_at_output = respan(krate.to_token_stream(), output_span);
    let policy_var = hidden("__retry_policy", Span::call_site());
    // The call's name for its events and metrics: the fn's. A static per
    // fn, so that the metric keys are built once per process.
    let op_var = hidden("__retry_op", Span::call_site());
    let op_static = hidden("__RETRY_OP", Span::call_site());
    let op_name = sig.ident.to_string();
    let attempt_var = hidden("__retry_attempt", output_span);
    let result_var = hidden("__retry_result", output_span);

    let max_attempts = policy.max_attempts;
    let duration = |d: std::time::Duration| {
        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
        quote!(::core::time::Duration::new(#secs, #nanos))
    };
    let (base, max) = (duration(policy.base), duration(policy.max));

    // Lending: `&mut self` and `&mut T` arguments go to each attempt of an
    // async fn and come back with its result (`Retry::run_lending`).
    let lending = plan.lends() && matches!(plan.shape, Shape::Async { .. });
    // Each attempt gets its own copy of every argument (a `&mut T` of a
    // blocking fn is reborrowed instead). Spanned at the argument, so "not
    // Clone" points there.
    let clones: Vec<TokenStream> = plan
        .args
        .iter()
        .filter(|arg| !(arg.lent && lending))
        .map(|arg| {
            let (source, binding) = (&arg.source, &arg.binding);
            if arg.lent {
                quote_spanned! {arg.span=> let #binding = &mut *#source; }
            } else {
                quote_spanned! {arg.span=>
                    let #binding = #krate::__private::RetryArg::__retry_clone(&#source);
                }
            }
        })
        .collect();
    // What is lent, as the call passes it and as each attempt binds it.
    let mut lent_sources = Vec::new();
    let mut lent_bindings = Vec::new();
    let mut lent_names = Vec::new();
    if lending {
        let lent_self = syn::Ident::new("__self", Span::call_site());
        if plan.lends_self {
            lent_sources.push(quote!(self));
            lent_bindings.push(quote!(#lent_self));
            lent_names.push(quote!(#lent_self));
        }
        for arg in plan.args.iter().filter(|arg| arg.lent) {
            let (source, binding) = (&arg.source, &arg.binding);
            lent_sources.push(quote!(#source));
            lent_bindings.push(binding.clone());
            lent_names.push(quote!(#source));
        }
    }

    let attempt = match &plan.shape {
        Shape::Async { output } => {
            // Spanned at the return type: if it is not `Result<T, E: RetryableError>`,
            // the one error (RetryOutput's message) points there.
            let output_at = respan(output.to_token_stream(), output_span);
            let into_result = quote_spanned! {output.span()=>
                <#output_at as #krate_at_output::__private::#output_trait>::into_result(#result_var)
            };
            // tracing-attributes' fake return: an unreachable `return` of
            // the loop's own `Result` type, before the body, fixes the async
            // block's return type, so a `return` of the wrong type in the
            // body is reported at that `return`, as without the macro.
            let fake_ty = quote_spanned! {output_span=>
                ::core::result::Result<
                    <#output_at as #krate_at_output::__private::#output_trait>::Ok,
                    <#output_at as #krate_at_output::__private::#output_trait>::Err,
                >
            };
            let fake_var = hidden("__retry_fake_return", output_span);
            if lending {
                // The body runs in an inner async block, so its `return`
                // ends the attempt, not the hand-back of the borrows; `self`
                // is `__self` in it.
                let block = rename_self(block.to_token_stream());
                quote! {
                    #[allow(unreachable_code, clippy::let_and_return, clippy::needless_return, clippy::diverging_sub_expression, clippy::type_complexity)]
                    async move {
                        let #result_var: #output = async {
                            if false {
                                let #fake_var: #fake_ty = loop {};
                                return #fake_var;
                            }
                            #block
                        }
                        .await;
                        ((#(#lent_names,)*), #into_result)
                    }
                }
            } else {
                quote! {
                    // The declared type on the result makes `?` and type errors
                    // in the body resolve (and point) as without the macro.
                    #[allow(unreachable_code, clippy::let_and_return, clippy::needless_return, clippy::diverging_sub_expression, clippy::type_complexity)]
                    let #attempt_var = async move {
                        if false {
                            let #fake_var: #fake_ty = loop {};
                            return #fake_var;
                        }
                        let #result_var: #output = #block;
                        #into_result
                    };
                    #attempt_var
                }
            }
        }
        // A blocking body runs in a closure with the fn's return type, so
        // `return`, `?` and type errors in it behave as in the fn itself.
        Shape::Blocking { output } => {
            let output_at = respan(output.to_token_stream(), output_span);
            let into_result = quote_spanned! {output.span()=>
                <#output_at as #krate_at_output::__private::#output_trait>::into_result(#result_var)
            };
            quote! {
                #[allow(unreachable_code, clippy::needless_return, clippy::diverging_sub_expression)]
                let #result_var = (|| -> #output #block)();
                #into_result
            }
        }
        // `#[async_trait]` turned the body into an expression building a
        // boxed future: building it again is one more attempt.
        Shape::AsyncTrait => quote!(#block),
    };

    let closure = if lending {
        quote! {
            move |(#(#lent_bindings,)*)| {
                #(#clones)*
                #attempt
            }
        }
    } else {
        quote! {
            move || {
                #(#clones)*
                #attempt
            }
        }
    };
    let blocking = matches!(plan.shape, Shape::Blocking { .. });
    // Without options, the plain loop (`with_retry` for any retryable
    // error); with them, or for a blocking fn, `Retry` carrying each, in
    // the order given below.
    let call = if options.any() || blocking {
        let mut builder = quote!(#krate::retry::Retry::new(#policy_var).__op(#op_var));
        if let Some(variant) = &options.jitter {
            builder.extend(quote!(.jitter(#krate::retry::Jitter::#variant)));
        }
        if let Some(deadline) = options.deadline {
            let deadline = duration(deadline);
            builder.extend(quote!(.deadline(#deadline)));
        }
        if let Some(ceiling) = options.max_retry_after {
            let ceiling = duration(ceiling);
            builder.extend(quote!(.max_retry_after(#ceiling)));
        }
        // Spanned at the user's tokens: a fn of the wrong type, or a budget
        // that is not a `&RetryBudget`, is reported there.
        if let Some(observer) = &options.on_retry {
            builder.extend(quote_spanned!(observer.span()=> .on_retry(&#observer)));
        }
        if let Some(budget) = &options.budget {
            builder.extend(quote_spanned!(budget.span()=> .budget(#budget)));
        }
        // Typed first, at the path, as a `fn(&E) -> bool` for the fn's own
        // error type: a fn of the wrong type is reported there, once.
        if let Some(when) = &options.when {
            let pred = match &plan.shape {
                Shape::Async { output } | Shape::Blocking { output } => {
                    quote_spanned! {when.span()=>
                        {
                            let __retry_when: fn(&<#output as #krate_at_output::__private::RetryOutputAny>::Err) -> bool = #when;
                            __retry_when
                        }
                    }
                }
                Shape::AsyncTrait => quote!(#when),
            };
            // The call itself at the return type: a return type that is not
            // a `Result` is reported there, once.
            builder = quote_spanned! {output_span=>
                #krate_at_output::retry::Retry::when(#builder, #pred)
            };
        }
        if let Some((limit, _)) = options.attempt_timeout {
            let limit = duration(limit);
            // At the return type: an error type without `From<TimedOut>`
            // is reported there, once.
            builder = quote_spanned! {output_span=>
                #krate_at_output::retry::Retry::attempt_timeout(#builder, #limit)
            };
        } else if let (Some(_), None, Shape::Async { output }, false) =
            (options.deadline, &options.when, &plan.shape, lending)
        {
            // The deadline cuts the attempt in flight when the error type
            // can say "timed out"; else it stops new waits only.
            builder = quote! {{
                use #krate::__private::{CutsInFlight as _, KeepsInFlight as _};
                (&#krate::__private::DeadlineDispatch::<
                    <#output as #krate::__private::RetryOutput>::Err,
                >::new(#builder))
                    .__retry_pick()
            }};
        }
        if blocking {
            quote_spanned! {output_span=> #builder.run_blocking(#closure) }
        } else if lending {
            quote_spanned! {output_span=> #builder.run_lending((#(#lent_sources,)*), #closure) }
        } else {
            quote_spanned! {output_span=> #builder.run(#closure) }
        }
    } else if lending {
        quote_spanned! {output_span=>
            #krate_at_output::retry::Retry::new(#policy_var).__op(#op_var).run_lending((#(#lent_sources,)*), #closure)
        }
    } else {
        quote_spanned! {output_span=>
            #krate_at_output::__private::with_policy(#op_var, #policy_var, #closure)
        }
    };
    let body = match &plan.shape {
        Shape::Async { output } => {
            let output_at = respan(output.to_token_stream(), output_span);
            quote_spanned! {output.span()=>
                <#output_at as #krate_at_output::__private::#output_trait>::from_result(#call.await)
            }
        }
        Shape::Blocking { output } => {
            let output_at = respan(output.to_token_stream(), output_span);
            quote_spanned! {output.span()=>
                <#output_at as #krate_at_output::__private::#output_trait>::from_result(#call)
            }
        }
        Shape::AsyncTrait => quote!(::std::boxed::Box::pin(#call)),
    };

    // The fn body's braces take the return type's span too: the compiler
    // checks the body's future as a whole there, and a wrong return type
    // should be reported once, at the return type.
    let fn_body = quote_spanned! {output_span=>
        {
            let #policy_var = #krate::RetryPolicy {
                max_attempts: #max_attempts,
                base_delay: #base,
                max_delay: #max,
            };
            let #op_var: &'static #krate::__private::Op = {
                static #op_static: #krate::__private::Op = #krate::__private::Op::new(#op_name);
                &#op_static
            };
            #body
        }
    };
    quote! {
        #(#attrs)*
        #vis #sig #fn_body
    }
}

/// `tokens` with every span set to `span` (the crate path is written at the
/// attribute; where it names the trait a wrong return type fails, it should
/// point at the return type instead).
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut respanned = Group::new(group.delimiter(), respan(group.stream(), span));
                respanned.set_span(span);
                token = TokenTree::Group(respanned);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

/// `self` renamed to `__self` throughout `tokens` (macro arguments too), as
/// async-trait does: inside the attempt, `self` is the borrow lent to it.
/// `Self` (the type) is left alone.
fn rename_self(tokens: TokenStream) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Ident(ident) if ident == "self" => {
                TokenTree::Ident(syn::Ident::new("__self", ident.span()))
            }
            TokenTree::Group(group) => {
                let mut renamed = Group::new(group.delimiter(), rename_self(group.stream()));
                renamed.set_span(group.span());
                TokenTree::Group(renamed)
            }
            other => other,
        })
        .collect()
}
