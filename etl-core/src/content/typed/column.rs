//! A column's type, the value a record gives it (a [`Cell`]), and what a
//! value that does not fit its column leaves behind (a [`Misfit`]).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use super::time;

/// The type of a data column. The first non-null value a table sees for a
/// member sets it, and it never changes after:
///
/// | JSON value | type |
/// |---|---|
/// | `true`, `false` | [`Bool`](ColumnType::Bool) |
/// | an integer within 64 bits, as written (`1`, not `1.0`) | [`Bigint`](ColumnType::Bigint) |
/// | any other number | [`Double`](ColumnType::Double) |
/// | a string that is an RFC 3339 date-time with an offset | [`Timestamp`](ColumnType::Timestamp) |
/// | any other string | [`Text`](ColumnType::Text) |
/// | an object or list kept whole | [`Json`](ColumnType::Json) |
///
/// [`Date`](ColumnType::Date) is only ever hinted. The names
/// ([`ColumnType::as_str`], [`FromStr`]) are the ones `[columns]` hints
/// use.
///
/// ```
/// use etl_core::content::typed::ColumnType;
///
/// assert_eq!("bigint".parse::<ColumnType>()?, ColumnType::Bigint);
/// assert_eq!(ColumnType::Timestamp.to_string(), "timestamp");
/// let unknown = "integer".parse::<ColumnType>().unwrap_err();
/// assert!(unknown.to_string().contains("bigint"));
/// # Ok::<(), etl_core::content::typed::UnknownType>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnType {
    /// `true` or `false`.
    Bool,
    /// A signed 64-bit integer.
    Bigint,
    /// A 64-bit float.
    Double,
    /// A point in time, UTC, to the microsecond.
    Timestamp,
    /// A calendar day (`YYYY-MM-DD`); only from a hint.
    Date,
    /// Text.
    Text,
    /// A JSON value kept whole, as canonical JSON text.
    Json,
}

impl ColumnType {
    /// Every type, in the order hints list them.
    pub const ALL: [ColumnType; 7] = [
        ColumnType::Bool,
        ColumnType::Bigint,
        ColumnType::Double,
        ColumnType::Text,
        ColumnType::Timestamp,
        ColumnType::Date,
        ColumnType::Json,
    ];

    /// The type's name in hints and in a printed schema.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::Bool => "bool",
            ColumnType::Bigint => "bigint",
            ColumnType::Double => "double",
            ColumnType::Timestamp => "timestamp",
            ColumnType::Date => "date",
            ColumnType::Text => "text",
            ColumnType::Json => "json",
        }
    }

    /// The widest [`ColumnType::fixed_width`].
    pub(crate) const WIDEST: usize = 8;

    /// Bytes a value of this type takes in a row when it has a fixed width
    /// (what counts against PostgreSQL's 8 KB page); 0 for text and json,
    /// which are stored out of line when large.
    pub(crate) fn fixed_width(self) -> usize {
        match self {
            ColumnType::Bool => 1,
            ColumnType::Date => 4,
            ColumnType::Bigint | ColumnType::Double | ColumnType::Timestamp => 8,
            ColumnType::Text | ColumnType::Json => 0,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no [`ColumnType`]; it says which names are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownType(pub String);

impl fmt::Display for UnknownType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = ColumnType::ALL.iter().map(|t| t.as_str()).collect();
        write!(
            f,
            "unknown column type {:?}; the types are {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownType {}

impl FromStr for ColumnType {
    type Err = UnknownType;

    fn from_str(name: &str) -> Result<Self, UnknownType> {
        ColumnType::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
            .ok_or_else(|| UnknownType(name.to_owned()))
    }
}

/// One value of a row, typed as its column is. Text borrows from the
/// record's text where it holds no escapes.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell<'a> {
    /// A [`ColumnType::Bool`] value.
    Bool(bool),
    /// A [`ColumnType::Bigint`] value.
    Bigint(i64),
    /// A [`ColumnType::Double`] value.
    Double(f64),
    /// A [`ColumnType::Timestamp`] value: microseconds since 1970-01-01
    /// 00:00:00 UTC.
    Timestamp(i64),
    /// A [`ColumnType::Date`] value: days since 1970-01-01.
    Date(i32),
    /// A [`ColumnType::Text`] value.
    Text(Cow<'a, str>),
    /// A [`ColumnType::Json`] value: its JSON text, canonical.
    Json(Cow<'a, str>),
}

impl Cell<'_> {
    /// The cell with its text copied out of the record.
    pub fn into_owned(self) -> Cell<'static> {
        match self {
            Cell::Bool(b) => Cell::Bool(b),
            Cell::Bigint(i) => Cell::Bigint(i),
            Cell::Double(f) => Cell::Double(f),
            Cell::Timestamp(t) => Cell::Timestamp(t),
            Cell::Date(d) => Cell::Date(d),
            Cell::Text(s) => Cell::Text(Cow::Owned(s.into_owned())),
            Cell::Json(s) => Cell::Json(Cow::Owned(s.into_owned())),
        }
    }

    /// The type of the column this cell is a value of.
    pub fn column_type(&self) -> ColumnType {
        match self {
            Cell::Bool(_) => ColumnType::Bool,
            Cell::Bigint(_) => ColumnType::Bigint,
            Cell::Double(_) => ColumnType::Double,
            Cell::Timestamp(_) => ColumnType::Timestamp,
            Cell::Date(_) => ColumnType::Date,
            Cell::Text(_) => ColumnType::Text,
            Cell::Json(_) => ColumnType::Json,
        }
    }
}

/// A value that did not fit its column: NULL in the column, whole in the
/// record's `_etl_row`, and named in its `_etl_meta`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Misfit {
    /// Where the value is in the record (a JSON Pointer into `_etl_row`).
    pub path: String,
    /// The column it did not fit.
    pub column: String,
    /// That column's type.
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    /// What the value was: `bool`, `integer`, `number`, `string`, `object`
    /// or `list`.
    pub found: &'static str,
}

impl serde::Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The `_etl_meta` text of a row: `None` when every value fit, else
/// `{"misfits": [...]}`.
///
/// ```
/// use etl_core::content::typed::{meta_json, ColumnType, Misfit};
///
/// assert_eq!(meta_json(&[]), None);
/// let m = Misfit { path: "/count".into(), column: "count".into(), column_type: ColumnType::Bigint, found: "string" };
/// assert_eq!(
///     meta_json(&[m]).as_deref(),
///     Some(r#"{"misfits":[{"path":"/count","column":"count","type":"bigint","found":"string"}]}"#)
/// );
/// ```
pub fn meta_json(misfits: &[Misfit]) -> Option<String> {
    #[derive(serde::Serialize)]
    struct Meta<'a> {
        misfits: &'a [Misfit],
    }
    if misfits.is_empty() {
        return None;
    }
    // Strings and numbers alone: serialising cannot fail.
    serde_json::to_string(&Meta { misfits }).ok()
}

/// A scalar as the record holds it, before a column is chosen for it.
#[derive(Clone, Debug)]
pub(crate) enum Scalar<'a> {
    Bool(bool),
    Int(i64),
    /// An integer past `i64`: a double, as the type table says.
    Uint(u64),
    Float(f64),
    Str(Cow<'a, str>),
}

impl<'a> Scalar<'a> {
    /// What a misfit says the value was.
    pub(crate) fn found(&self) -> &'static str {
        match self {
            Scalar::Bool(_) => "bool",
            Scalar::Int(_) | Scalar::Uint(_) => "integer",
            Scalar::Float(_) => "number",
            Scalar::Str(_) => "string",
        }
    }

    /// The type a new column takes from this value, and the value in it.
    pub(crate) fn infer(self) -> Cell<'a> {
        match self {
            Scalar::Bool(b) => Cell::Bool(b),
            Scalar::Int(i) => Cell::Bigint(i),
            Scalar::Uint(u) => Cell::Double(u as f64),
            Scalar::Float(f) => Cell::Double(f),
            Scalar::Str(s) => match time::timestamp_micros(&s) {
                Some(micros) => Cell::Timestamp(micros),
                None => Cell::Text(s),
            },
        }
    }

    /// The value in a column of type `to`, or `None` when it does not fit.
    /// An integer fits a double column; a number or boolean fits a text
    /// column as its JSON text; any scalar fits a json column.
    pub(crate) fn fit(self, to: ColumnType) -> Option<Cell<'a>> {
        Some(match (to, self) {
            (ColumnType::Bool, Scalar::Bool(b)) => Cell::Bool(b),
            (ColumnType::Bigint, Scalar::Int(i)) => Cell::Bigint(i),
            (ColumnType::Double, Scalar::Int(i)) => Cell::Double(i as f64),
            (ColumnType::Double, Scalar::Uint(u)) => Cell::Double(u as f64),
            (ColumnType::Double, Scalar::Float(f)) => Cell::Double(f),
            (ColumnType::Timestamp, Scalar::Str(s)) => Cell::Timestamp(time::timestamp_micros(&s)?),
            (ColumnType::Date, Scalar::Str(s)) => Cell::Date(time::date_days(&s)?),
            (ColumnType::Text, Scalar::Str(s)) => Cell::Text(s),
            (ColumnType::Text, other) => Cell::Text(Cow::Owned(other.json_text())),
            (ColumnType::Json, other) => Cell::Json(Cow::Owned(other.json_text())),
            _ => return None,
        })
    }

    /// The value as canonical JSON text (as `serde_json` writes it).
    fn json_text(&self) -> String {
        let text = match self {
            Scalar::Bool(b) => serde_json::to_string(b),
            Scalar::Int(i) => serde_json::to_string(i),
            Scalar::Uint(u) => serde_json::to_string(u),
            Scalar::Float(f) => serde_json::to_string(&serde_json::Number::from_f64(*f)),
            Scalar::Str(s) => serde_json::to_string(s.as_ref()),
        };
        // A bool, an integer, a finite float or a string: cannot fail.
        text.unwrap_or_default()
    }
}
