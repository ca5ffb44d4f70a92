//! The checker's types: what an expression denotes, as far as can be known before run time.

use std::fmt;

use crate::acs::fields::{self, Field, HookSpec, Ty};

/// Which typed table an object-valued expression's members are looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Payload(&'static HookSpec),
    Metadata,
    Provenance,
    Intent,
}

impl Table {
    pub fn fields(self) -> &'static [Field] {
        match self {
            Table::Payload(h) => h.fields,
            Table::Metadata => fields::METADATA,
            Table::Provenance => fields::PROVENANCE,
            Table::Intent => fields::INTENT,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Table::Payload(h) => format!("the {} payload", h.name),
            Table::Metadata => "metadata".into(),
            Table::Provenance => "provenance".into(),
            Table::Intent => "the intent".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    Bool,
    Number,
    String,
    Enum(&'static [&'static str]),
    Duration,
    List(Box<Type>),
    Set(Box<Type>),
    /// An object whose members are typed by a table, at `prefix` ("" = the table's root).
    Object(Table, String),
    /// Any JSON value: tool argument values, Rego values, open objects. Checked at run time.
    Json,
    /// A tool argument: compares as its value, and carries provenance (`args.to has untrusted`).
    Arg,
    /// A label name (only meaningful after `has` and in `turns_since`).
    Label,
    /// The session's Intent (`intent.permits(tool)`).
    Intent,
    /// Already reported; stays silent to avoid cascades.
    Error,
}

impl Type {
    pub fn is_error(&self) -> bool {
        matches!(self, Type::Error)
    }

    /// Dynamically typed: any comparison is allowed and decided at run time.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, Type::Json | Type::Arg | Type::Error)
    }

    pub fn is_stringish(&self) -> bool {
        matches!(self, Type::String | Type::Enum(_)) || self.is_dynamic()
    }

    pub fn is_numeric(&self) -> bool {
        matches!(self, Type::Number) || self.is_dynamic()
    }

    pub fn is_boolish(&self) -> bool {
        matches!(self, Type::Bool) || self.is_dynamic()
    }

    /// The element type of a collection, if this is one.
    pub fn element(&self) -> Option<Type> {
        match self {
            Type::List(t) | Type::Set(t) => Some((**t).clone()),
            Type::Json | Type::Error => Some(Type::Json),
            _ => None,
        }
    }

    /// Whether a value of this type carries provenance labels.
    pub fn carries_provenance(&self) -> bool {
        match self {
            Type::Arg | Type::Json | Type::Error => true,
            Type::Object(table, prefix) => {
                let p = join(prefix, "provenance");
                fields::lookup(table.fields(), &p).is_some()
            }
            Type::List(t) => t.carries_provenance(),
            _ => false,
        }
    }

    /// Two types can be compared with `==`.
    pub fn comparable(&self, other: &Type) -> bool {
        if self.is_dynamic() || other.is_dynamic() {
            return true;
        }
        match (self, other) {
            (a, b) if a.is_stringish() && b.is_stringish() => true,
            (Type::List(a) | Type::Set(a), Type::List(b) | Type::Set(b)) => a.comparable(b),
            (Type::Object(..), Type::Object(..)) => true,
            (a, b) => a == b,
        }
    }

    /// The type of a field from an ACS table.
    pub fn of_field(table: Table, field: &Field) -> Type {
        Type::of_ty(table, field.path, field.ty, field.items)
    }

    fn of_ty(table: Table, path: &str, ty: Ty, items: Option<Ty>) -> Type {
        match ty {
            Ty::String => Type::String,
            Ty::Number | Ty::Integer => Type::Number,
            Ty::Bool => Type::Bool,
            Ty::Any => Type::Json,
            Ty::Enum(values) => Type::Enum(values),
            Ty::Object => Type::Object(table, path.to_string()),
            Ty::Provenance => Type::Object(Table::Provenance, String::new()),
            Ty::Intent => Type::Object(Table::Intent, String::new()),
            Ty::Map => Type::Object(table, path.to_string()),
            Ty::List => {
                let item_path = format!("{path}[]");
                let item = Type::of_ty(table, &item_path, items.unwrap_or(Ty::Any), None);
                Type::List(Box::new(item))
            }
        }
    }
}

pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("bool"),
            Type::Number => f.write_str("number"),
            Type::String => f.write_str("string"),
            Type::Enum(values) => {
                let shown: Vec<&str> = values.iter().take(5).copied().collect();
                write!(f, "one of {}", shown.join("|"))?;
                if values.len() > 5 {
                    f.write_str("|…")?;
                }
                Ok(())
            }
            Type::Duration => f.write_str("duration"),
            Type::List(t) => write!(f, "list of {t}"),
            Type::Set(t) => write!(f, "set of {t}"),
            Type::Object(table, prefix) if prefix.is_empty() => {
                write!(f, "object ({})", table.describe())
            }
            Type::Object(_, prefix) => write!(f, "object `{prefix}`"),
            Type::Json => f.write_str("JSON value"),
            Type::Arg => f.write_str("tool argument"),
            Type::Label => f.write_str("label"),
            Type::Intent => f.write_str("intent"),
            Type::Error => f.write_str("(error)"),
        }
    }
}
