//! Step 2, for the function: checks the signature `#[retry]` can serve and
//! plans how each argument reaches every attempt.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::spanned::Spanned;
use syn::{
    FnArg, GenericArgument, Ident, Pat, PathArguments, ReceiverKind, ReturnType, Signature, Type,
    TypeParamBound,
};

use crate::errors::Errors;

/// How the function produces its result.
pub enum Shape {
    /// `async fn ... -> Result<T, E>`: the body becomes one attempt.
    Async {
        /// The declared return type.
        output: Box<Type>,
    },
    /// A blocking `fn ... -> Result<T, E>`: the body becomes one attempt of
    /// a loop that sleeps on the thread.
    Blocking {
        /// The declared return type.
        output: Box<Type>,
    },
    /// A method `#[async_trait]` already rewrote into
    /// `fn ... -> Pin<Box<dyn Future<Output = ...> + Send + '_>>`, whose body
    /// builds the future: each attempt runs the body again.
    AsyncTrait,
}

/// One argument handed to every attempt: `let #binding = clone(&#source);`,
/// or, for a `&mut T`, lent to each attempt in turn.
pub struct ArgPlan {
    /// The name it has in the signature (rewritten when it was a pattern).
    pub source: Ident,
    /// What the attempt binds: the original pattern, `mut` included.
    pub binding: TokenStream,
    /// Where a "not Clone" error should point: the argument.
    pub span: Span,
    /// A `&mut T`: lent, not cloned.
    pub lent: bool,
}

pub struct Plan {
    pub shape: Shape,
    pub args: Vec<ArgPlan>,
    /// The fn takes `&mut self`: `self` is lent to each attempt in turn.
    pub lends_self: bool,
}

impl Plan {
    /// Whether any exclusive borrow is lent to the attempts.
    pub fn lends(&self) -> bool {
        self.lends_self || self.args.iter().any(|a| a.lent)
    }
}

/// Checks `sig` and rewrites its argument patterns to plain names (the
/// patterns move into each attempt). Every problem goes to `errors`.
pub fn plan(sig: &mut Signature, errors: &mut Errors) -> Option<Plan> {
    let shape = shape(sig, errors);
    let mut args = Vec::new();
    let mut lends_self = false;
    // Where each exclusive borrow is, in case it cannot be lent.
    let mut lent_spans = Vec::new();
    for (index, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            FnArg::Receiver(receiver) => match check_receiver(receiver) {
                Ok(exclusive) => {
                    lends_self = exclusive;
                    if exclusive {
                        lent_spans.push(receiver.span());
                    }
                }
                Err(e) => errors.push(e),
            },
            FnArg::Typed(typed) => {
                let lent = matches!(&*typed.ty, Type::Reference(r) if r.mutability.is_some());
                if lent {
                    lent_spans.push(typed.ty.span());
                }
                let span = typed.span();
                match &mut *typed.pat {
                    // A plain name keeps its name (rustdoc shows it); `mut`
                    // moves to the attempt's binding.
                    Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => {
                        let binding = pat.to_token_stream();
                        pat.mutability = None;
                        args.push(ArgPlan {
                            source: pat.ident.clone(),
                            binding,
                            span,
                            lent,
                        });
                    }
                    // Any other pattern is destructured in each attempt.
                    pat => {
                        let source =
                            format_ident!("__retry_arg{}", index, span = Span::mixed_site());
                        let binding = pat.to_token_stream();
                        *pat = Pat::Verbatim(quote!(#source));
                        args.push(ArgPlan {
                            source,
                            binding,
                            span,
                            lent,
                        });
                    }
                }
            }
        }
    }
    // `#[async_trait]` already turned the body into one boxed future that
    // holds the borrows: there is nothing left to lend to each attempt.
    if matches!(shape, Some(Shape::AsyncTrait)) {
        for span in lent_spans {
            errors.push(syn::Error::new(
                span,
                "#[retry] cannot lend a `&mut` borrow to each attempt of an `#[async_trait]` method \
                 (the trait already boxed the body with the borrow in it): take `&self`, or put \
                 #[retry] on an inherent `async fn` the method calls",
            ));
        }
    }
    shape.map(|shape| Plan {
        shape,
        args,
        lends_self,
    })
}

fn shape(sig: &Signature, errors: &mut Errors) -> Option<Shape> {
    let output = match &sig.output {
        ReturnType::Type(_, ty) => Some(ty),
        ReturnType::Default => None,
    };
    let blocking = sig.asyncness.is_none();
    if blocking && output.is_some_and(|ty| is_boxed_future(ty)) {
        return Some(Shape::AsyncTrait);
    }
    match output {
        Some(ty) if may_be_result(ty) && blocking => Some(Shape::Blocking { output: ty.clone() }),
        Some(ty) if may_be_result(ty) => Some(Shape::Async { output: ty.clone() }),
        Some(ty) => {
            errors.push(syn::Error::new_spanned(
                ty,
                "#[retry] needs a fn returning `Result<T, E>` (or an alias of it) with `E: RetryableError`, such as `EtlError`: only an error can be retried",
            ));
            None
        }
        None => {
            errors.push(syn::Error::new(
                sig.paren_token.span.close(),
                "#[retry] needs a fn returning `Result<T, E>` with `E: RetryableError`: add, say, `-> Result<T, EtlError>`",
            ));
            None
        }
    }
}

/// `Ok(true)` for `&mut self` (lent to each attempt in turn), `Ok(false)`
/// for `&self`; `self` by value is an error.
fn check_receiver(receiver: &syn::Receiver) -> syn::Result<bool> {
    let by_value = || {
        syn::Error::new_spanned(
            receiver,
            "#[retry] cannot take `self` by value: every attempt needs its own `self`; take `&self` \
             or `&mut self`",
        )
    };
    match &receiver.kind {
        ReceiverKind::Reference(_, _, mutability) => Ok(mutability.is_some()),
        ReceiverKind::Typed(_, ty) => match &**ty {
            Type::Reference(r) => Ok(r.mutability.is_some()),
            _ => Err(by_value()),
        },
        _ => Err(by_value()),
    }
}

/// Whether `ty` can name a `Result` at all: a path can (`Result<T, E>`, an
/// alias such as `Fetched<T>`); a tuple, reference or `impl Trait` cannot.
/// Whether the path is a `Result` with a retryable error is the type checker's to say,
/// on this same type (see `expand`).
fn may_be_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path.qself.is_none(),
        Type::Group(group) => may_be_result(&group.elem),
        Type::Paren(paren) => may_be_result(&paren.elem),
        _ => false,
    }
}

/// `Pin<Box<dyn Future<Output = ..> + ..>>`, as `#[async_trait]` writes it.
fn is_boxed_future(ty: &Type) -> bool {
    fn only_arg(ty: &Type, name: &str) -> Option<Type> {
        let Type::Path(path) = ty else { return None };
        let last = path.path.segments.last()?;
        if last.ident != name {
            return None;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        match args.args.first()? {
            GenericArgument::Type(inner) => Some(inner.clone()),
            _ => None,
        }
    }
    let Some(boxed) = only_arg(ty, "Pin") else {
        return false;
    };
    let Some(Type::TraitObject(object)) = only_arg(&boxed, "Box") else {
        return false;
    };
    object.bounds.iter().any(|bound| {
        matches!(bound, TypeParamBound::Trait(t) if t.path.segments.last().is_some_and(|s| s.ident == "Future"))
    })
}
