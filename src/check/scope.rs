//! Which constant, label or predicate a bare name means. Each module has its own names: a bare
//! name in a file means that file's module's own definition, or one of the modules the file
//! `use`s directly (not the modules those use). The files named together on the command line
//! (a policy and its `_test.ward`, a folder served as one policy) are one module.

use std::collections::HashSet;

use super::expr::Ctx;
use super::{Checker, Resolution, Type};
use crate::diagnostics::{Code, Diagnostic, Span};

/// What kind of definition a name found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    Const,
    Label,
    Pred,
}

impl Named {
    fn word(self) -> &'static str {
        match self {
            Named::Const => "constant",
            Named::Label => "label",
            Named::Pred => "predicate",
        }
    }
}

/// The result of looking a bare name up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    None,
    /// The kind and the namespace that defines it.
    One(Named, usize),
    /// Defined by several modules the file uses.
    Ambiguous(Vec<(Named, usize)>),
}

impl Checker<'_> {
    /// What `name` is in namespace `ns`, if anything.
    pub(crate) fn defined_in(&self, ns: usize, name: &str) -> Option<Named> {
        if self.constants[ns].contains_key(name) {
            Some(Named::Const)
        } else if self.labels[ns].contains_key(name) {
            Some(Named::Label)
        } else if self.preds[ns].contains_key(name) {
            Some(Named::Pred)
        } else {
            None
        }
    }

    /// What a bare `name` means in `unit`: its own module's definition first, then the modules
    /// it uses directly.
    pub(crate) fn lookup(&self, unit: usize, name: &str) -> Lookup {
        let own = self.ns[unit];
        if let Some(k) = self.defined_in(own, name) {
            return Lookup::One(k, own);
        }
        let found: Vec<(Named, usize)> = self.imports[unit]
            .iter()
            .filter_map(|&ns| self.defined_in(ns, name).map(|k| (k, ns)))
            .collect();
        match found.len() {
            0 => Lookup::None,
            1 => Lookup::One(found[0].0, found[0].1),
            _ => Lookup::Ambiguous(found),
        }
    }

    /// Whether `name` is a constant `unit` can see.
    pub(crate) fn const_visible(&self, unit: usize, name: &str) -> bool {
        matches!(self.lookup(unit, name), Lookup::One(Named::Const, _))
    }

    /// Whether `name` is a label `unit` can see.
    pub(crate) fn label_visible(&self, unit: usize, name: &str) -> bool {
        matches!(self.lookup(unit, name), Lookup::One(Named::Label, _))
    }

    /// The labels `unit` can see (for suggestions).
    pub(crate) fn visible_labels(&self, unit: usize) -> Vec<&str> {
        self.visible(unit, Named::Label)
    }

    /// The constants, labels and predicates `unit` can see, of one kind.
    pub(crate) fn visible(&self, unit: usize, kind: Named) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let mut spaces = vec![self.ns[unit]];
        spaces.extend(self.imports[unit].iter().copied());
        for ns in spaces {
            let names: Vec<&str> = match kind {
                Named::Const => self.constants[ns].keys().copied().collect(),
                Named::Label => self.labels[ns].keys().copied().collect(),
                Named::Pred => self.preds[ns].keys().copied().collect(),
            };
            for n in names {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// A module that defines `name` but that `unit` does not use directly: the help for a name
    /// that is not visible (`add use std.taint`).
    pub(crate) fn defined_elsewhere(&self, unit: usize, name: &str) -> Option<String> {
        let own = self.ns[unit];
        (0..self.constants.len())
            .filter(|ns| *ns != own && !self.imports[unit].contains(ns))
            .find_map(|ns| {
                let kind = self.defined_in(ns, name)?;
                let module = &self.loaded.units.get(ns.checked_sub(1)?)?.name;
                Some(format!(
                    "`{name}` is a {} of `{module}`, which this file does not use directly: add `use {module}`",
                    kind.word()
                ))
            })
    }

    /// The name of a namespace, for messages: the module's name, or "this policy".
    pub(crate) fn ns_name(&self, ns: usize) -> String {
        if ns == 0 {
            return "this policy".into();
        }
        match self.loaded.units.get(ns - 1) {
            Some(u) => format!("`{}`", u.name),
            None => "this policy".into(),
        }
    }

    /// The file that defines `name` in namespace `ns`.
    pub(crate) fn defining_file(
        &self,
        kind: Named,
        ns: usize,
        name: &str,
    ) -> crate::diagnostics::FileId {
        let unit = match kind {
            Named::Const => self.constants[ns].get(name).map(|c| c.unit),
            Named::Label => self.labels[ns].get(name).copied(),
            Named::Pred => self.preds[ns].get(name).map(|p| p.unit),
        };
        self.file_of(unit.unwrap_or(0))
    }

    /// Resolves a constant or label defined in namespace `ns` (a bare name already looked up,
    /// or a qualified `module.name`). Predicates are not values.
    pub(crate) fn resolve_def(
        &mut self,
        cx: &mut Ctx,
        kind: Named,
        ns: usize,
        name: &str,
        span: Span,
    ) -> Type {
        self.mark_used(ns, name);
        let file = self.defining_file(kind, ns, name);
        match kind {
            Named::Const => {
                let t = self.const_type(ns, name);
                self.resolutions.insert(
                    (cx.file, span),
                    (
                        Resolution::Constant {
                            name: name.into(),
                            file,
                        },
                        t.clone(),
                    ),
                );
                t
            }
            Named::Label => {
                self.resolutions.insert(
                    (cx.file, span),
                    (
                        Resolution::Label {
                            name: name.into(),
                            file,
                        },
                        Type::Label,
                    ),
                );
                Type::Label
            }
            Named::Pred => {
                self.resolutions.insert(
                    (cx.file, span),
                    (
                        Resolution::Predicate {
                            name: name.into(),
                            file,
                        },
                        Type::Bool,
                    ),
                );
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::NotAValue,
                        cx.file,
                        span,
                        format!("`{name}` is a predicate"),
                    )
                    .with_label("call it")
                    .with_help(format!("call it with its arguments: `{name}(…)`")),
                );
                Type::Error
            }
        }
    }

    /// A bare name that may be a constant, label or predicate: `Some(type)` when it is one (or
    /// is ambiguous, which is reported), `None` when the name is none of these here.
    pub(crate) fn resolve_bare(&mut self, cx: &mut Ctx, name: &str, span: Span) -> Option<Type> {
        match self.lookup(cx.unit, name) {
            Lookup::None => None,
            Lookup::One(kind, ns) => Some(self.resolve_def(cx, kind, ns, name, span)),
            Lookup::Ambiguous(found) => {
                self.diagnostics
                    .push(self.ambiguous(cx.file, cx.unit, name, span, &found));
                Some(Type::Error)
            }
        }
    }

    /// `check::ambiguous`: a bare name two used modules define.
    pub(crate) fn ambiguous(
        &self,
        file: crate::diagnostics::FileId,
        unit: usize,
        name: &str,
        span: Span,
        found: &[(Named, usize)],
    ) -> Diagnostic {
        let listed: Vec<String> = found
            .iter()
            .map(|(k, ns)| format!("the {} `{name}` of {}", k.word(), self.ns_name(*ns)))
            .collect();
        // The local names of those modules in this file, for the suggested spelling.
        let aliases: Vec<String> = found
            .iter()
            .filter_map(|(_, ns)| {
                let module = &self.loaded.units.get(ns.checked_sub(1)?)?.name;
                self.aliases[unit].iter().find_map(|(local, a)| match a {
                    super::Alias::Module(m) if m == module => Some(format!("`{local}.{name}`")),
                    _ => None,
                })
            })
            .collect();
        Diagnostic::error(
            Code::Ambiguous,
            file,
            span,
            format!("`{name}` is ambiguous: it is {}", listed.join(" and ")),
        )
        .with_label("defined by more than one used module")
        .with_help(if aliases.is_empty() {
            "qualify it with the module's name: `module.NAME`".to_string()
        } else {
            format!("qualify it: write {}", aliases.join(" or "))
        })
    }

    /// A module's own constants, labels and predicates may not repeat a name a module it uses
    /// directly defines: the bare name would mean two things.
    pub(crate) fn check_import_clashes(&mut self) {
        let loaded = self.loaded;
        let mut seen: HashSet<(usize, String, usize)> = HashSet::new();
        // Each namespace's own definitions.
        let defs: Vec<(usize, super::Definition)> = self
            .definitions
            .iter()
            .filter(|d| d.kind.is_scoped())
            .filter_map(|d| Some((self.ns_of_file(d.file)?, d.clone())))
            .collect();
        for (u, unit) in loaded.units.iter().enumerate() {
            let own = self.ns[u];
            for &other in &self.imports[u] {
                for (ns, d) in &defs {
                    if *ns != own || self.defined_in(other, &d.name).is_none() {
                        continue;
                    }
                    if !seen.insert((own, d.name.clone(), other)) {
                        continue;
                    }
                    let what = d.kind.word();
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::Duplicate,
                            d.file,
                            d.span,
                            format!("the {what} `{}` is defined twice", d.name),
                        )
                        .with_label(format!("second definition of `{}`", d.name))
                        .with_help(format!(
                            "`{}` is already defined in {}, which {} uses; rename this one",
                            d.name,
                            self.ns_name(other),
                            loaded.sources.get(unit.file).name
                        )),
                    );
                }
            }
        }
    }
}
