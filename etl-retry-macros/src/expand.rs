//! Step 3 of 3: the code. The body stays inside the same fn (so `self`,
//! generics, `Self` and `where` clauses keep working) and runs once per
//! attempt inside the retry loop; the policy is a constant. Each piece of
//! the expansion is one small fn below: the attempt, the closure that makes
//! one, the loop with its options, the call, the fn body.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, Type};

use crate::signature::{ArgPlan, Plan, Shape};
use crate::validate::Policy;

/// What every step needs to know.
struct Cx<'a> {
    policy: &'a Policy,
    plan: &'a Plan,
    /// The crate path as written (`::etl_core`, or `crate = "..."`).
    krate: &'a syn::Path,
    /// The crate path respanned at the return type: where the traits a
    /// wrong return type fails are named, so that it is reported there once.
    krate_at_output: TokenStream,
    /// Where a wrong return type is reported, once: at the return type.
    output_span: Span,
    /// `&mut self` / `&mut T` go to each attempt of an async fn in turn
    /// (`Retry::run_lending`).
    lending: bool,
}

impl Cx<'_> {
    /// The declared return type, if the fn is not an `#[async_trait]` one.
    fn output(&self) -> Option<&Type> {
        match &self.plan.shape {
            Shape::Async { output } | Shape::Blocking { output } => Some(output),
            Shape::AsyncTrait => None,
        }
    }

    /// `<Output as RetryOutput>::name`, spanned at the return type.
    fn output_assoc(&self, output: &Type, name: &str) -> TokenStream {
        let output_at = respan(output.to_token_stream(), self.output_span);
        let krate = &self.krate_at_output;
        let name = Ident::new(name, self.output_span);
        quote_spanned! {self.output_span=> <#output_at as #krate::__private::RetryOutput>::#name }
    }
}

/// Mixed-site: names the user's code cannot see or clash with. Those whose
/// types carry the return type are located at it, so that a wrong return
/// type is not reported a second time at the attribute.
fn hidden(name: &str, at: Span) -> Ident {
    Ident::new(name, Span::mixed_site().located_at(at))
}

pub fn retry(policy: &Policy, plan: &Plan, item: &ItemFn) -> TokenStream {
    let output_span = match &plan.shape {
        Shape::Async { output } | Shape::Blocking { output } => output.span(),
        Shape::AsyncTrait => Span::call_site(),
    };
    let cx = Cx {
        policy,
        plan,
        krate: &policy.krate,
        krate_at_output: respan(policy.krate.to_token_stream(), output_span),
        output_span,
        lending: plan.lends() && matches!(plan.shape, Shape::Async { .. }),
    };
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
        ..
    } = item;
    let call = call(&cx, &closure(&cx, &attempt(&cx, block)));
    let fn_body = fn_body(&cx, &sig.ident, &result(&cx, call));
    quote! {
        #(#attrs)*
        #vis #sig #fn_body
    }
}

/// One attempt: the body, with `return`, `?` and type errors behaving as
/// in the fn itself.
fn attempt(cx: &Cx<'_>, block: &syn::Block) -> TokenStream {
    let result_var = hidden("__retry_result", cx.output_span);
    match &cx.plan.shape {
        Shape::Async { output } => {
            let into_result = cx.output_assoc(output, "into_result");
            // tracing-attributes' fake return: an unreachable `return` of
            // the loop's own `Result` type, before the body, fixes the async
            // block's return type, so a `return` of the wrong type in the
            // body is reported at that `return`, as without the macro.
            let (ok, err) = (
                cx.output_assoc(output, "Ok"),
                cx.output_assoc(output, "Err"),
            );
            let fake_var = hidden("__retry_fake_return", cx.output_span);
            let fake_ty = quote_spanned! {cx.output_span=> ::core::result::Result<#ok, #err> };
            let fake = quote! {
                if false {
                    let #fake_var: #fake_ty = loop {};
                    return #fake_var;
                }
            };
            // Lent, `self` is the borrow the attempt was handed: `__self`.
            let block = if cx.lending {
                rename_self(block.to_token_stream())
            } else {
                block.to_token_stream()
            };
            // The declared type on the result makes `?` and type errors in
            // the body resolve (and point) as without the macro.
            quote! {
                #fake
                let #result_var: #output = #block;
                #into_result(#result_var)
            }
        }
        // A blocking body runs in a closure with the fn's return type, so
        // `return`, `?` and type errors in it behave as in the fn itself.
        Shape::Blocking { output } => {
            let into_result = cx.output_assoc(output, "into_result");
            quote! {
                #[allow(unreachable_code, clippy::needless_return, clippy::diverging_sub_expression)]
                let #result_var = (|| -> #output #block)();
                #into_result(#result_var)
            }
        }
        // `#[async_trait]` turned the body into an expression building a
        // boxed future: building it again is one more attempt.
        Shape::AsyncTrait => quote!(#block),
    }
}

/// The closure that makes each attempt, with its own copy of every
/// argument (spanned at the argument, so "not Clone" points there).
fn closure(cx: &Cx<'_>, attempt: &TokenStream) -> TokenStream {
    let krate = cx.krate;
    let clones = cx
        .plan
        .args
        .iter()
        .filter(|arg| !(arg.lent && cx.lending))
        .map(|arg| {
            let (source, binding) = (&arg.source, &arg.binding);
            if arg.lent {
                // A blocking fn's `&mut T`: reborrowed for each attempt.
                quote_spanned! {arg.span=> let #binding = &mut *#source; }
            } else {
                quote_spanned! {arg.span=>
                    let #binding = #krate::__private::RetryArg::__retry_clone(&#source);
                }
            }
        });
    // The lints the fake return and a body that always returns early set
    // off, allowed on the attempt alone (not on the user's whole fn).
    let lints = quote! {
        #[allow(unreachable_code, clippy::let_and_return, clippy::needless_return, clippy::diverging_sub_expression, clippy::type_complexity)]
    };
    let attempt_var = hidden("__retry_attempt", cx.output_span);
    match &cx.plan.shape {
        Shape::Async { .. } if cx.lending => {
            // The borrows come in by value and go back with the result. The
            // body runs in an inner async block (so its `return` ends the
            // attempt, not the hand-back), under the attempt's cutoff: a cut
            // drops that block alone, and the borrows still go back.
            let bindings = lent(cx, quote!(__self), |arg| arg.binding.clone());
            let names = lent(cx, quote!(__self), |arg| arg.source.to_token_stream());
            let cutoff = hidden("__retry_cutoff", Span::call_site());
            let result = hidden("__retry_out", Span::call_site());
            quote! {
                move |(#(#bindings,)*), #cutoff| {
                    #(#clones)*
                    async move {
                        #lints
                        let #result = #cutoff.run(async { #attempt }).await;
                        ((#(#names,)*), #result)
                    }
                }
            }
        }
        Shape::Async { .. } => quote! {
            move || {
                #(#clones)*
                #lints
                let #attempt_var = async move { #attempt };
                #attempt_var
            }
        },
        Shape::Blocking { .. } | Shape::AsyncTrait => quote! {
            move || {
                #(#clones)*
                #attempt
            }
        },
    }
}

/// What is lent, in order: the receiver as `self_as`, then each `&mut`
/// argument as `name` gives it (its binding, as each attempt binds it; or
/// its source, as the call passes it and the attempt hands it back).
fn lent(
    cx: &Cx<'_>,
    self_as: TokenStream,
    name: impl Fn(&ArgPlan) -> TokenStream,
) -> Vec<TokenStream> {
    let self_ = cx.plan.lends_self.then_some(self_as);
    self_
        .into_iter()
        .chain(cx.plan.args.iter().filter(|arg| arg.lent).map(name))
        .collect()
}

/// `Retry::new(policy)` with every option given, in the order below (any
/// order means the same). Every token of ours is spanned at the return
/// type, so that the call is one expression there: an error type the loop
/// cannot serve is then reported once, at the return type. The user's own
/// tokens keep their spans: a fn of the wrong type, a budget that is not a
/// `&RetryBudget` or a breaker that is not a `CircuitBreaker` is reported
/// on them.
fn builder(cx: &Cx<'_>) -> TokenStream {
    let at = cx.output_span;
    let krate = &cx.krate_at_output;
    let options = &cx.policy.options;
    let policy_var = hidden("__retry_policy", at);
    let op_var = hidden("__retry_op", at);
    let mut builder = quote_spanned!(at=> #krate::retry::Retry::new(#policy_var).__op(#op_var));
    if let Some(variant) = &options.jitter {
        let variant = Ident::new(&variant.to_string(), at);
        builder.extend(quote_spanned!(at=> .jitter(#krate::retry::Jitter::#variant)));
    }
    if let Some(deadline) = options.deadline {
        let deadline = respan(duration(deadline), at);
        builder.extend(quote_spanned!(at=> .deadline(#deadline)));
    }
    if let Some(ceiling) = options.max_retry_after {
        let ceiling = respan(duration(ceiling), at);
        builder.extend(quote_spanned!(at=> .max_retry_after(#ceiling)));
    }
    if let Some(observer) = &options.on_retry {
        let arg = quote_spanned!(observer.span()=> &#observer);
        builder.extend(quote_spanned!(at=> .on_retry(#arg)));
    }
    if let Some(budget) = &options.budget {
        builder.extend(quote_spanned!(at=> .budget(#budget)));
    }
    if let Some(breaker) = &options.breaker {
        let arg = quote_spanned!(breaker.span()=> &#breaker);
        builder.extend(quote_spanned!(at=> .breaker(#arg)));
    }
    if let Some(when) = &options.when {
        // Typed first, at the path, as a `fn(&E) -> bool` for the fn's own
        // error type: a fn of the wrong type is reported there, once.
        let pred = match cx.output() {
            Some(output) => {
                let err = cx.output_assoc(output, "Err");
                quote_spanned! {when.span()=>
                    {
                        let __retry_when: fn(&#err) -> bool = #when;
                        __retry_when
                    }
                }
            }
            None => quote!(#when),
        };
        builder.extend(quote_spanned!(at=> .when(#pred)));
    }
    if let Some((limit, _)) = options.attempt_timeout {
        let limit = respan(duration(limit), at);
        builder.extend(quote_spanned!(at=> .attempt_timeout(#limit)));
    } else if let (Some(_), Shape::Async { output }) = (options.deadline, &cx.plan.shape) {
        // The deadline cuts the attempt in flight when the error type can
        // say "timed out"; else it stops new waits only.
        let err = cx.output_assoc(output, "Err");
        // The `use` at the attribute: one of the two traits goes unused,
        // and that is ours to know, not a lint on the user's return type.
        let plain_krate = cx.krate;
        let picks = quote! {
            #[allow(unused_imports)]
            use #plain_krate::__private::{CutsInFlight as _, KeepsInFlight as _};
        };
        builder = quote_spanned! {at=> {
            #picks
            (&#krate::__private::DeadlineDispatch::<#err, _, _>::new(#builder)).__retry_pick()
        }};
    }
    builder
}

/// The retry loop's call on the closure: the plain loop without options
/// (`with_retry`'s), else `Retry` with its options and the run method for
/// the fn's shape. At the return type: an error type the loop cannot serve
/// is reported there, once.
fn call(cx: &Cx<'_>, closure: &TokenStream) -> TokenStream {
    let krate = &cx.krate_at_output;
    let blocking = matches!(cx.plan.shape, Shape::Blocking { .. });
    if !cx.policy.options.any() && !blocking && !cx.lending {
        let policy_var = hidden("__retry_policy", Span::call_site());
        let op_var = hidden("__retry_op", Span::call_site());
        return quote_spanned! {cx.output_span=>
            #krate::__private::with_policy(#op_var, #policy_var, #closure)
        };
    }
    let builder = builder(cx);
    if blocking {
        quote_spanned! {cx.output_span=> #builder.run_blocking(#closure) }
    } else if cx.lending {
        let sources = lent(cx, quote!(self), |arg| arg.source.to_token_stream());
        quote_spanned! {cx.output_span=> #builder.run_lending((#(#sources,)*), #closure) }
    } else {
        quote_spanned! {cx.output_span=> #builder.run(#closure) }
    }
}

/// The call's result, back in the declared return type.
fn result(cx: &Cx<'_>, call: TokenStream) -> TokenStream {
    match &cx.plan.shape {
        Shape::Async { output } => {
            let from_result = cx.output_assoc(output, "from_result");
            quote_spanned! {output.span()=> #from_result(#call.await) }
        }
        Shape::Blocking { output } => {
            let from_result = cx.output_assoc(output, "from_result");
            quote_spanned! {output.span()=> #from_result(#call) }
        }
        Shape::AsyncTrait => quote!(::std::boxed::Box::pin(#call)),
    }
}

/// The fn body: the policy as a constant, the call's name as a static (so
/// that its metric keys are built once per process), and the result. Its
/// braces take the return type's span: the compiler checks the body's
/// future as a whole there, and a wrong return type should be reported
/// once, at the return type.
fn fn_body(cx: &Cx<'_>, name: &Ident, result: &TokenStream) -> TokenStream {
    let krate = cx.krate;
    let policy_var = hidden("__retry_policy", Span::call_site());
    let op_var = hidden("__retry_op", Span::call_site());
    let op_static = hidden("__RETRY_OP", Span::call_site());
    let op_name = name.to_string();
    let max_attempts = cx.policy.max_attempts;
    let (base, max) = (duration(cx.policy.base), duration(cx.policy.max));
    quote_spanned! {cx.output_span=>
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
            #result
        }
    }
}

/// A duration as a constant expression.
fn duration(d: std::time::Duration) -> TokenStream {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
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
                TokenTree::Ident(Ident::new("__self", ident.span()))
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
