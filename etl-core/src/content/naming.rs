//! Names of tables and columns made from a record's member names, as dlt's
//! default `snake_case` naming makes them (so a dlt user finds the same
//! names), fitted to a database's length limit, and never two members on
//! one name.
//!
//! - [`snake_case`]: one member name (or a resource's) as an identifier.
//! - [`Names`]: the names of one table's columns (or of one output's
//!   tables): each path of members gets one name, kept for good; a name
//!   that comes out the same as another path's, or as a reserved (loader)
//!   name, ends in a short hash of its path instead; a name past the
//!   length limit is cut and ends in that hash.
//!
//! Names are data, never SQL: a caller quotes every one it writes.

use sha2::{Digest as _, Sha256};
use std::collections::HashMap;

/// What joins the names of a nested member's path: `user__login` for the
/// member `login` of the member `user` (dlt's path separator).
pub const PATH_SEPARATOR: &str = "__";

/// PostgreSQL's longest identifier, in bytes (`NAMEDATALEN - 1`).
pub const POSTGRES_MAX_BYTES: usize = 63;

/// How many hex digits of a path's SHA-256 mark a name made unique or cut.
const TAG_LEN: usize = 8;

/// One identifier as dlt 1.31's `snake_case` naming convention makes it
/// (without its shortening: [`Names`] fits names to a limit):
///
/// - white space around it is trimmed;
/// - `+` and `*` become `x`, `-` becomes `_`, `@` becomes `a`, `|` becomes
///   `l`;
/// - every run of other characters that are not ASCII letters, digits or
///   `_` becomes one `_` (dlt keeps any Unicode decimal digit here; this
///   keeps ASCII ones only, so every name is ASCII);
/// - `camelCase` and `PascalCase` words are split with `_`
///   (`DealFlow` → `deal_flow`, `HTTPServer` → `http_server`), and all is
///   lower case;
/// - a leading digit is prefixed with `_`;
/// - each trailing `_` becomes `x`, and runs of `_` become one.
///
/// A name that is empty once trimmed stays empty (dlt refuses it; [`Names`]
/// names such a member by its hash).
///
/// ```
/// use etl_core::content::naming::snake_case;
///
/// assert_eq!(snake_case("DealFlow"), "deal_flow");
/// assert_eq!(snake_case("user-Login"), "user_login");
/// assert_eq!(snake_case("2fa enabled"), "_2fa_enabled");
/// assert_eq!(snake_case("price_"), "pricex");
/// assert_eq!(snake_case("naïve café"), "na_ve_cafx");
/// ```
pub fn snake_case(identifier: &str) -> String {
    let reduced = reduce_alphabet(identifier.trim());
    let split = split_lower_then_upper(&split_words(&reduced));
    let mut name = split.to_ascii_lowercase();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    let kept = name.trim_end_matches('_').len();
    let trailing = name.len() - kept;
    name.truncate(kept);
    name.extend(std::iter::repeat_n('x', trailing));
    collapse_underscores(&name)
}

/// The characters dlt maps to others, then every run of what is not an
/// ASCII letter, digit or `_` as one `_`.
fn reduce_alphabet(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for c in text.chars() {
        let c = match c {
            '+' | '*' => 'x',
            '-' => '_',
            '@' => 'a',
            '|' => 'l',
            c => c,
        };
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

/// `_` before every capitalised word (an upper-case letter and one or more
/// lower-case ones) that follows something other than `_`, matches taken
/// left to right without overlap (dlt's first `camelCase` break).
fn split_words(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let word_after = c != '_'
            && chars.get(i + 1).is_some_and(char::is_ascii_uppercase)
            && chars.get(i + 2).is_some_and(char::is_ascii_lowercase);
        out.push(c);
        i += 1;
        if word_after {
            let end = (i + 1..chars.len())
                .find(|&j| !chars[j].is_ascii_lowercase())
                .unwrap_or(chars.len());
            out.push('_');
            out.extend(&chars[i..end]);
            i = end;
        }
    }
    out
}

/// `_` between a lower-case letter or digit and the upper-case letter that
/// follows it, matches taken left to right without overlap (dlt's second
/// `camelCase` break).
fn split_lower_then_upper(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        let upper_next = chars.get(i + 1).is_some_and(char::is_ascii_uppercase);
        if (c.is_ascii_lowercase() || c.is_ascii_digit()) && upper_next {
            out.push('_');
            out.push(chars[i + 1]);
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// Every run of `_` as one: no name holds the path separator by itself.
fn collapse_underscores(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out
}

/// The short hash that marks a name made unique or cut: the first hex
/// digits of the SHA-256 of `path`.
pub fn tag(path: &str) -> String {
    hex::encode(&Sha256::digest(path.as_bytes())[..TAG_LEN / 2])
}

/// `name`, at most `max_bytes` long: as it is when it fits, else cut and
/// ending in `_` and the [`tag`] of `path` (the whole path the name stands
/// for, so two long names cut alike still differ). `name` is ASCII, as
/// [`snake_case`] makes it, so a cut never splits a character.
///
/// ```
/// use etl_core::content::naming::fit;
///
/// assert_eq!(fit("title", 63, "/title"), "title");
/// let long = "a".repeat(100);
/// let cut = fit(&long, 63, "/a...");
/// assert_eq!(cut.len(), 63);
/// assert!(cut.starts_with("aaaa") && cut.ends_with(&etl_core::content::naming::tag("/a...")));
/// ```
pub fn fit(name: &str, max_bytes: usize, path: &str) -> String {
    if name.len() <= max_bytes {
        return name.to_owned();
    }
    with_tag(name, max_bytes, path)
}

/// `name` cut so that `_<tag of path>` follows it within `max_bytes`.
fn with_tag(name: &str, max_bytes: usize, path: &str) -> String {
    let tag = tag(path);
    let room = max_bytes.saturating_sub(TAG_LEN + 1);
    let mut cut = floor_char_boundary(name, room).to_owned();
    cut.push('_');
    cut.push_str(&tag);
    cut
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary.
fn floor_char_boundary(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A path of member names as a JSON Pointer (RFC 6901): `/user/login`.
/// What a name's hash is taken of, and how a column says where its values
/// come from.
///
/// ```
/// use etl_core::content::naming::pointer;
///
/// assert_eq!(pointer(&["user", "login"]), "/user/login");
/// assert_eq!(pointer(&["a/b", "~"]), "/a~1b/~0");
/// ```
pub fn pointer<S: AsRef<str>>(path: &[S]) -> String {
    let mut out = String::new();
    for member in path {
        out.push('/');
        out.push_str(&member.as_ref().replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// The names of one namespace (one table's columns, or one output's
/// tables): each path of members gets one name, and keeps it.
///
/// A path's name is its members' [`snake_case`] names joined by
/// [`PATH_SEPARATOR`] (empty ones left out, as dlt does). Where that name
/// is empty, reserved, or another path's already, it ends in `_` and the
/// [`tag`] of the path's [`pointer()`] instead; where it is longer than the
/// limit, it is cut and ends in that tag. The names a namespace already
/// holds (read back from the output) are [`Names::keep`]t first, so a
/// column keeps its name in every later run and every writer.
///
/// ```
/// use etl_core::content::naming::{tag, Names, POSTGRES_MAX_BYTES};
///
/// let mut columns = Names::new(&["_etl_key", "_etl_row"], Some(POSTGRES_MAX_BYTES));
/// assert_eq!(columns.name(&["user", "login"]), "user__login");
/// assert_eq!(columns.name(&["createdAt"]), "created_at");
/// // Another member that comes out the same gets its own name...
/// assert_eq!(columns.name(&["created_at"]), format!("created_at_{}", tag("/created_at")));
/// // ...and the first keeps its own, asked again.
/// assert_eq!(columns.name(&["createdAt"]), "created_at");
/// // A member named as a loader column never takes it.
/// assert_eq!(columns.name(&["_etl_key"]), format!("_etl_key_{}", tag("/_etl_key")));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Name by path (the path's pointer).
    by_path: HashMap<String, String>,
    /// Path by name, reserved names included (with no path).
    by_name: HashMap<String, Option<String>>,
    max_bytes: Option<usize>,
}

impl Names {
    /// An empty namespace in which `reserved` names are never given to a
    /// path, and no name is longer than `max_bytes` (`None`: no limit).
    pub fn new(reserved: &[&str], max_bytes: Option<usize>) -> Self {
        Names {
            by_path: HashMap::new(),
            by_name: reserved.iter().map(|r| ((*r).to_owned(), None)).collect(),
            max_bytes,
        }
    }

    /// Records that the path `pointer` is named `name` already (a column
    /// the output holds). `Err` names the path that holds `name` already,
    /// or the name `pointer` holds already, where they differ.
    pub fn keep(&mut self, pointer: &str, name: &str) -> Result<(), String> {
        if let Some(held) = self.by_path.get(pointer) {
            return match held == name {
                true => Ok(()),
                false => Err(format!("{pointer} is named {held:?} already, not {name:?}")),
            };
        }
        if let Some(holder) = self.by_name.get(name) {
            return Err(match holder {
                Some(path) => format!("{name:?} names {path} already, not {pointer}"),
                None => format!("{name:?} is reserved"),
            });
        }
        self.by_path.insert(pointer.to_owned(), name.to_owned());
        self.by_name
            .insert(name.to_owned(), Some(pointer.to_owned()));
        Ok(())
    }

    /// The name of the path of members `path`: the one it holds, else a
    /// new one, held from now on.
    pub fn name<S: AsRef<str>>(&mut self, path: &[S]) -> &str {
        self.name_at(&pointer(path), path)
    }

    /// [`Names::name`] for a thing whose key in this namespace is `at`
    /// rather than the pointer of `parts` (a child table, keyed by the
    /// chain of lists it stands for; the `value` column of a list of
    /// scalars, keyed by the element itself): named from `parts`, told
    /// apart and tagged by `at`.
    pub fn name_at<S: AsRef<str>>(&mut self, at: &str, parts: &[S]) -> &str {
        if !self.by_path.contains_key(at) {
            let name = self.new_name(parts, at);
            self.by_name.insert(name.clone(), Some(at.to_owned()));
            self.by_path.insert(at.to_owned(), name);
        }
        &self.by_path[at]
    }

    /// The name the path named `at` (its pointer) already holds, if any.
    pub fn get(&self, at: &str) -> Option<&str> {
        self.by_path.get(at).map(String::as_str)
    }

    /// A name for `path` (at `at`) that no path or reserved name holds.
    fn new_name<S: AsRef<str>>(&self, path: &[S], at: &str) -> String {
        let parts: Vec<String> = path
            .iter()
            .map(|member| snake_case(member.as_ref()))
            .filter(|part| !part.is_empty())
            .collect();
        let joined = parts.join(PATH_SEPARATOR);
        let max = self.max_bytes.unwrap_or(usize::MAX);
        let plain = fit(&joined, max, at);
        if !plain.is_empty() && !self.by_name.contains_key(&plain) {
            return plain;
        }
        // Taken or empty: the path's own tag. Another path's name can end
        // in this tag only if the two pointers' hashes meet.
        let room = max.min(joined.len() + TAG_LEN + 1);
        let mut tagged = with_tag(&joined, room, at);
        let mut salt = 0u32;
        while self.by_name.contains_key(&tagged) {
            salt += 1;
            tagged = with_tag(&joined, room, &format!("{at}#{salt}"));
        }
        tagged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names dlt 1.31 gives (`snake_case.NamingConvention().normalize_identifier`,
    /// run on this machine), for the names dlt accepts.
    const DLT: &[(&str, &str)] = &[
        ("DealFlow", "deal_flow"),
        ("dealFlow", "deal_flow"),
        ("HTTPServer", "http_server"),
        ("getHTTPResponseCode", "get_http_response_code"),
        ("user-Login", "user_login"),
        ("2fa enabled", "_2fa_enabled"),
        ("price_", "pricex"),
        ("naïve café", "na_ve_cafx"),
        ("already_snake", "already_snake"),
        ("ABC", "abc"),
        ("ABCDef", "abc_def"),
        ("aB", "a_b"),
        ("a1B", "a1_b"),
        ("A1b", "a1b"),
        ("__init__", "_initxx"),
        ("_etl_key", "_etl_key"),
        ("select", "select"),
        ("order", "order"),
        ("user", "user"),
        ("a b  c", "a_b_c"),
        ("x+y*z", "xxyxz"),
        ("me@host", "meahost"),
        ("a|b", "alb"),
        ("a--b", "a_b"),
        ("a.b", "a_b"),
        ("a/b", "a_b"),
        ("a~b", "a_b"),
        ("\"quoted\"", "_quotedx"),
        ("semi;colon", "semi_colon"),
        (
            "Robert'); DROP TABLE students;--",
            "robert_drop_table_studentsxxx",
        ),
        ("  padded  ", "padded"),
        ("ñandú", "_andx"),
        ("日本語", "x"),
        ("emoji😀name", "emoji_name"),
        ("CamelCaseString", "camel_case_string"),
        ("camel2Case", "camel2_case"),
        ("version2", "version2"),
        ("V2", "v2"),
        ("iOS", "i_os"),
        ("MyHTMLParser", "my_html_parser"),
        ("lower_UPPER", "lower_upper"),
        ("UPPER_lower", "upper_lower"),
        ("a__b", "a_b"),
        ("a___b", "a_b"),
        ("trailing__", "trailingxx"),
        ("_leading", "_leading"),
        ("9lives", "_9lives"),
        ("123", "_123"),
        ("a-", "ax"),
        ("-a", "_a"),
        ("Über", "_ber"),
        ("AbcDEFGhi", "abc_def_ghi"),
        ("x_Yz", "x_yz"),
        ("_Ab", "_ab"),
        ("aBcDeF", "a_bc_de_f"),
    ];

    #[test]
    fn names_as_dlt_gives_them() {
        for (given, dlt) in DLT {
            assert_eq!(snake_case(given), *dlt, "{given:?}");
        }
    }

    /// What every name a namespace gives must be: an ASCII identifier of
    /// lower-case letters, digits and `_`, within the limit, not reserved.
    fn assert_valid(name: &str, reserved: &[&str]) {
        assert!(
            !name.is_empty() && name.len() <= POSTGRES_MAX_BYTES,
            "{name:?}"
        );
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name:?}"
        );
        assert!(!reserved.contains(&name), "{name:?} is reserved");
    }

    #[test]
    fn hostile_member_names_each_get_a_name_of_their_own() {
        let reserved = ["_etl_key", "_etl_id", "_etl_row", "_etl_meta"];
        let long = "k".repeat(10_000);
        let hostile: Vec<String> = [
            "\"",
            "'",
            "a\"b",
            "x; DROP TABLE t;--",
            "select",
            "user",
            "order",
            "",
            " ",
            "日本語",
            "ключ",
            "emoji😀",
            "CreatedAt",
            "createdAt",
            "created_at",
            "CREATED_AT",
            "created__at",
            "a__b",
            "_etl_key",
            "_etl_row",
            "__",
            "___",
            long.as_str(),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain((0..5_000).map(|i| i.to_string()))
        .collect();
        let mut names = Names::new(&reserved, Some(POSTGRES_MAX_BYTES));
        let mut seen = HashMap::new();
        for key in &hostile {
            let name = names.name(&[key.as_str()]).to_owned();
            assert_valid(&name, &reserved);
            if let Some(other) = seen.insert(name.clone(), key.clone()) {
                panic!("{key:?} and {other:?} share {name:?}");
            }
        }
        // Asked again, in another order: the same names.
        for key in hostile.iter().rev() {
            assert_eq!(seen[names.name(&[key.as_str()])], *key);
        }
        assert_eq!(
            names.name(&["created_at"]).len(),
            "created_at".len() + 1 + TAG_LEN
        );
    }

    #[test]
    fn nested_paths_join_with_the_separator_and_long_ones_are_cut_by_their_whole_path() {
        let mut names = Names::new(&[], Some(POSTGRES_MAX_BYTES));
        assert_eq!(
            names.name(&["user", "Profile", "homeURL"]),
            "user__profile__home_url"
        );
        // An empty member name is left out of the path, as dlt leaves it.
        assert_eq!(names.name(&["meta", "", "id"]), "meta__id");
        let deep: Vec<String> = (0..20).map(|i| format!("level{i}")).collect();
        let cut = names.name(&deep).to_owned();
        assert_eq!(cut.len(), POSTGRES_MAX_BYTES);
        assert!(cut.starts_with("level0__level1__"), "{cut}");
        assert!(cut.ends_with(&tag(&pointer(&deep))), "{cut}");
        // Two long paths alike but for their end differ.
        let mut other = deep.clone();
        other[19] = "levelX".into();
        assert_ne!(names.name(&other), cut);
    }

    #[test]
    fn kept_names_hold_across_runs_whatever_comes_first() {
        // A writer named `createdAt` first; the next run meets `created_at`
        // first, yet `createdAt` keeps the plain name.
        let mut first = Names::new(&[], Some(POSTGRES_MAX_BYTES));
        let plain = first.name(&["createdAt"]).to_owned();
        let tagged = first.name(&["created_at"]).to_owned();
        let mut next = Names::new(&[], Some(POSTGRES_MAX_BYTES));
        next.keep("/createdAt", &plain).unwrap();
        next.keep("/created_at", &tagged).unwrap();
        assert_eq!(next.name(&["created_at"]), tagged);
        assert_eq!(next.name(&["createdAt"]), plain);
        assert_eq!(next.get("/createdAt"), Some(plain.as_str()));
        // Two paths on one name, or one path on two, are refused.
        assert!(next
            .keep("/other", &plain)
            .unwrap_err()
            .contains("/createdAt"));
        assert!(next.keep("/createdAt", "elsewhere").is_err());
        let mut reserved = Names::new(&["_etl_key"], None);
        assert!(reserved
            .keep("/_etl_key", "_etl_key")
            .unwrap_err()
            .contains("reserved"));
    }

    proptest::proptest! {
        #[test]
        fn any_member_names_get_distinct_valid_names(
            keys in proptest::collection::vec(proptest::collection::vec(".{0,80}", 1..4), 1..40)
        ) {
            let mut names = Names::new(&["_etl_key"], Some(POSTGRES_MAX_BYTES));
            let mut by_name: HashMap<String, String> = HashMap::new();
            for path in &keys {
                let name = names.name(path).to_owned();
                assert_valid(&name, &["_etl_key"]);
                let at = pointer(path);
                if let Some(other) = by_name.insert(name.clone(), at.clone()) {
                    proptest::prop_assert_eq!(other, at, "two paths share {}", name);
                }
            }
        }
    }
}
