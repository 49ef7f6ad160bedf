use super::*;
use etl_core::content::typed::{ColumnType, Contract, SchemaOptions};
use reqwest::header::HeaderMap;

const BASE: &str = r#"name = "items"
url = "http://127.0.0.1:8080/items"
records = "/data"
id = "/id"
"#;

fn parse(extra: &str) -> Result<Resource, ConfigError> {
    parse_with(extra, |_| None)
}

fn parse_with(extra: &str, env: impl Fn(&str) -> Option<String>) -> Result<Resource, ConfigError> {
    Resource::parse(&format!("{BASE}{extra}"), "items.toml", env)
}

fn error(extra: &str) -> String {
    parse(extra).unwrap_err().to_string()
}

#[test]
fn the_contract_example_reads_whole() {
    let env = |name: &str| (name == "ITEMS_TOKEN").then(|| "t0k".to_owned());
    let p = parse_with(
        r#"updated_at = "/updated_at"
[params]
per_page = "50"
[headers]
Accept = "application/json"
[paginate]
style = "next_url"
next = "/next"
[incremental]
param = "updated_since"
params = { sort = "updated_at" }
[auth]
type = "bearer"
env = "ITEMS_TOKEN"
"#,
        env,
    )
    .unwrap();
    assert_eq!(p.name, "items");
    assert!(
        shown(&p).starts_with(r#"NextUrl { next: "/next""#),
        "{}",
        shown(&p)
    );
    assert_eq!(
        sent(&p),
        (
            "http://127.0.0.1:8080/items".to_string(),
            vec![("authorization".to_string(), "Bearer t0k".to_string())]
        )
    );
    assert_eq!(p.incremental.as_ref().unwrap().params["sort"], "updated_at");
    assert!(p.check_incremental().is_ok());
    assert!(
        !format!("{p:?}").contains("t0k"),
        "Debug never shows a secret"
    );
}

/// What a request of `p` sends of its auth: the URL and the headers
/// (secrets included: the test checks they reach the request).
fn sent(p: &Resource) -> (String, Vec<(String, String)>) {
    let client = crate::wire::client(&p.url.origin(), HeaderMap::new(), None).unwrap();
    let auth = p.auth.as_ref().unwrap();
    let mut request = auth.request(client.get(auth.url(&p.url)));
    for (name, value) in auth.headers() {
        request = request.header(name, value);
    }
    let request = request.build().unwrap();
    let headers = request
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    (request.url().to_string(), headers)
}

/// The paginator a file describes, as its `Debug` shows its settings.
fn shown(p: &Resource) -> String {
    format!("{:?}", p.paginate)
}

#[test]
fn each_style_takes_its_defaults() {
    let has = |extra: &str, parts: &[&str]| {
        let p = parse(extra).unwrap_or_else(|e| panic!("{e}"));
        let shown = shown(&p);
        for part in parts {
            assert!(shown.contains(part), "{part} in {shown}");
        }
    };
    has(
        "[paginate]\nstyle = \"offset\"\nlimit = 100\ntotal = \"/count\"\n",
        &[
            "Offset {",
            r#"offset_param: "offset""#,
            r#"limit_param: "limit""#,
            "limit: 100",
            r#"total: Some("/count")"#,
            "has_more: None",
        ],
    );
    has(
        "[paginate]\nstyle = \"page_number\"\n",
        &[
            "PageNumber {",
            r#"page_param: "page""#,
            "start: 1",
            "total_pages: None",
        ],
    );
    has(
        "[paginate]\nstyle = \"cursor\"\ncursor = \"/meta/next_cursor\"\n",
        &[
            r#"Cursor { from: Body("/meta/next_cursor")"#,
            r#"cursor_param: "cursor""#,
        ],
    );
    has(
        "[paginate]\nstyle = \"cursor\"\nlast_record = \"/id\"\ncursor_param = \"starting_after\"\nhas_more = \"/has_more\"\n",
        &[
            r#"Cursor { from: LastRecord("/id")"#,
            r#"cursor_param: "starting_after""#,
            r#"has_more: Some("/has_more")"#,
        ],
    );
    has(
        "[paginate]\nstyle = \"header_cursor\"\nheader = \"X-Next-Cursor\"\n",
        &[
            r#"HeaderCursor { header: "X-Next-Cursor""#,
            r#"cursor_param: "cursor""#,
        ],
    );
    has("[paginate]\nstyle = \"link_header\"\n", &["LinkHeader"]);
    has("", &["Single"]);
}

#[test]
fn a_style_s_keys_are_checked_where_they_are_written() {
    let e = error("[paginate]\nstyle = \"cursor\"\ncursor = \"/c\"\nlast_record = \"/id\"\n");
    assert!(
        e.contains("line 8") && e.contains("`paginate.last_record` and `paginate.cursor`"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"cursor\"\n");
    assert!(e.contains("(or `paginate.last_record`"), "{e}");
    let e = error("[paginate]\nstyle = \"header_cursor\"\n");
    assert!(
        e.contains("`paginate.header` is required by style header_cursor"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"header_cursor\"\nheader = \"X Next\"\n");
    assert!(
        e.contains("`paginate.header` is not a valid header name"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"offset\"\nlimit = 5\nhas_more = \"more\"\n");
    assert!(
        e.contains("`paginate.has_more`") && e.contains("RFC 6901"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"next_url\"\nnxt = \"/n\"\nnext = \"/n\"\n");
    assert!(
        e.contains("did you mean `next`?") && e.contains("line 7"),
        "{e}"
    );
    let e = error("[paginate]\nnext = \"/n\"\n");
    assert!(e.contains("`paginate.style` is required"), "{e}");
}

#[test]
fn a_post_takes_a_body_and_parameters_in_it_and_a_get_does_not() {
    let p = parse(
        "method = \"POST\"\n[body]\nq = \"x\"\nn = 3\n[paginate]\nstyle = \"offset\"\nlimit = 2\nparam_in = \"body\"\n",
    )
    .unwrap();
    assert_eq!(p.method, Method::Post);
    assert_eq!(p.param_in, ParamIn::Body);
    assert_eq!(
        serde_json::Value::Object(p.body.clone()),
        serde_json::json!({"q": "x", "n": 3})
    );
    let p = parse("").unwrap();
    assert_eq!((p.method, p.param_in), (Method::Get, ParamIn::Query));
    assert!(p.body.is_empty());
    let e = error("[body]\nq = \"x\"\n");
    assert!(
        e.contains("line 5") && e.contains("`body` needs method = \"POST\""),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"cursor\"\ncursor = \"/c\"\nparam_in = \"body\"\n");
    assert!(e.contains("`paginate.param_in` needs method"), "{e}");
    let e = error("method = \"PUT\"\n");
    assert!(e.contains("`method` must be \"GET\" or \"POST\""), "{e}");
    let e = error(
        "method = \"POST\"\n[paginate]\nstyle = \"cursor\"\ncursor = \"/c\"\nparam_in = \"form\"\n",
    );
    assert!(e.contains("`paginate.param_in` must be"), "{e}");
}

#[test]
fn update_times_take_a_unit_and_incremental_an_initial_cursor_and_a_lag() {
    let p = parse(
        "updated_at = \"/ts\"\nupdated_at_unit = \"ms\"\n[incremental]\nparam = \"since\"\ninitial = 1767225600000\nlag = \"1h\"\n",
    )
    .unwrap();
    let at = p.updated_at.as_ref().unwrap();
    assert_eq!(at.unit, Some(TimeUnit::Millis));
    let incremental = p.incremental.as_ref().unwrap();
    assert_eq!(incremental.initial.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(incremental.lag, Some(Duration::from_secs(3600)));
    let p = parse(
        "updated_at = \"/t\"\n[incremental]\nparam = \"since\"\ninitial = \"2026-01-01T00:00:00Z\"\nlag = 90\n",
    )
    .unwrap();
    assert_eq!(p.updated_at.as_ref().unwrap().unit, None);
    assert_eq!(
        p.incremental.as_ref().unwrap().lag,
        Some(Duration::from_secs(90))
    );
    for (extra, says) in [
        (
            "updated_at = \"/t\"\nupdated_at_unit = \"us\"\n",
            "`updated_at_unit` must be",
        ),
        (
            "updated_at_unit = \"s\"\n",
            "`updated_at_unit` needs `updated_at`",
        ),
        (
            "[incremental]\nparam = \"s\"\ninitial = \"yesterday\"\n",
            "`incremental.initial` must be",
        ),
        (
            "[incremental]\nparam = \"s\"\ninitial = -1\n",
            "`incremental.initial` the Unix time -1",
        ),
        (
            "[incremental]\nparam = \"s\"\nlag = \"an hour\"\n",
            "`incremental.lag` is not a duration",
        ),
        (
            "[incremental]\nparam = \"s\"\nlag = true\n",
            "`incremental.lag` must be",
        ),
    ] {
        let e = error(extra);
        assert!(e.contains(says), "{extra}: {e}");
    }
}

#[test]
fn a_misspelt_key_or_style_is_named_with_its_line_and_a_guess() {
    let e = error("recods = \"/x\"\n");
    assert!(
        e.contains("items.toml, line 5")
            && e.contains("`recods`")
            && e.contains("did you mean `records`?"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"nexturl\"\n");
    assert!(
        e.contains("line 6") && e.contains("did you mean `next_url`?"),
        "{e}"
    );
    let e = error("[auth]\ntype = \"header\"\nenv = \"T\"\nnaem = \"x\"\n");
    assert!(e.contains("did you mean `name`?"), "{e}");
    // Nothing close: no guess.
    let e = error("zzzzzz = 1\n");
    assert!(
        e.contains("unknown field `zzzzzz`") && !e.contains("did you mean"),
        "{e}"
    );
}

#[test]
fn wrong_types_and_syntax_errors_name_the_line() {
    let e = error("[params]\nper_page = 50\n");
    assert!(
        e.contains("line 6") && e.contains("per_page = 50") && e.contains("expected a string"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"offset\"\nlimit = \"5\"\n");
    assert!(e.contains("line 7") && e.contains("limit = \"5\""), "{e}");
    let e = error("name2 = \n");
    assert!(e.contains("line 5"), "{e}");
}

#[test]
fn pointers_urls_and_names_are_checked() {
    let e = Resource::parse(&BASE.replace("\"/data\"", "\"data\""), "f", |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 3") && e.contains("`records`") && e.contains("RFC 6901"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"next_url\"\nnext = \"next\"\n");
    assert!(
        e.contains("`paginate.next`") && e.contains("RFC 6901"),
        "{e}"
    );
    let e = Resource::parse(
        &BASE.replace("http://127.0.0.1:8080/items", "ftp://x/"),
        "f",
        |_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`url` is not an http(s) URL"), "{e}");
    for bad in ["it ems", "my-items", "Items", "1items", "", &"x".repeat(49)] {
        let e = Resource::parse(&BASE.replace("\"items\"", &format!("{bad:?}")), "f", |_| {
            None
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 1") && e.contains("`name` must be a plain identifier"),
            "{bad:?}: {e}"
        );
    }
    for good in ["_items", "items_2", &"x".repeat(48)] {
        let p = Resource::parse(
            &BASE.replace("\"items\"", &format!("{good:?}")),
            "f",
            |_| None,
        );
        assert_eq!(p.unwrap().name, good);
    }
    let e = error("[headers]\n\"bad header\" = \"x\"\n");
    assert!(e.contains("`headers`"), "{e}");
    let e = Resource::parse(&BASE.replace("\"/id\"", "\"\""), "f", |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 4") && e.contains("`id` is the whole record"),
        "{e}"
    );
    let e = error("updated_at = \"\"\n");
    assert!(e.contains("`updated_at` is the whole record"), "{e}");
}

#[test]
fn keys_of_another_style_and_missing_required_keys_are_named() {
    let e = error("[paginate]\nstyle = \"next_url\"\nnext = \"/n\"\nlimit = 5\n");
    assert!(
        e.contains("`paginate.limit` is not a key of style next_url") && e.contains("line 8"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"offset\"\n");
    assert!(
        e.contains("`paginate.limit` is required by style offset"),
        "{e}"
    );
    let e = error("[paginate]\nstyle = \"cursor\"\n");
    assert!(e.contains("`paginate.cursor` is required"), "{e}");
    let e = error("[paginate]\nstyle = \"offset\"\nlimit = 0\n");
    assert!(e.contains("at least 1"), "{e}");
}

#[test]
fn secrets_come_from_the_environment_and_a_missing_one_is_named() {
    let e = error("[auth]\ntype = \"bearer\"\nenv = \"NOPE_TOKEN\"\n");
    assert!(
        e.contains("`auth.env`") && e.contains("NOPE_TOKEN is not set") && e.contains("line 7"),
        "{e}"
    );
    let env = |name: &str| Some(format!("{name}-value"));
    let p = parse_with(
        "[auth]\ntype = \"basic\"\nusername_env = \"U\"\npassword_env = \"P\"\n",
        env,
    )
    .unwrap();
    // base64("U-value:P-value")
    assert_eq!(
        sent(&p).1,
        [(
            "authorization".to_string(),
            "Basic VS12YWx1ZTpQLXZhbHVl".to_string()
        )]
    );
    let p = parse_with(
        "[auth]\ntype = \"query\"\nname = \"api_key\"\nenv = \"K\"\n",
        env,
    )
    .unwrap();
    assert_eq!(
        sent(&p),
        (
            "http://127.0.0.1:8080/items?api_key=K-value".to_string(),
            vec![]
        )
    );
    assert_eq!(p.auth.as_ref().unwrap().secret_param(), Some("api_key"));
    let p = parse_with(
        "[auth]\ntype = \"header\"\nname = \"X-Api-Key\"\nenv = \"K\"\n",
        env,
    )
    .unwrap();
    assert_eq!(
        sent(&p).1,
        [("x-api-key".to_string(), "K-value".to_string())]
    );
    assert!(
        !format!("{p:?}").contains("K-value"),
        "Debug never shows a secret"
    );
    let e = parse_with("[auth]\ntype = \"header\"\nenv = \"K\"\n", env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`auth.name` is required"), "{e}");
    let e = parse_with(
        "[auth]\ntype = \"bearer\"\nenv = \"K\"\nusername_env = \"U\"\n",
        env,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`auth.username_env` is not a key of auth type bearer"),
        "{e}"
    );
}

#[test]
fn incremental_needs_its_table_and_updated_at() {
    let e = parse("")
        .unwrap()
        .check_incremental()
        .unwrap_err()
        .to_string();
    assert!(e.contains("[incremental]"), "{e}");
    let e = parse("[incremental]\nparam = \"since\"\n")
        .unwrap()
        .check_incremental()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`updated_at`"), "{e}");
}

#[test]
fn spans_inside_a_multibyte_character_still_name_the_line() {
    let at = Locator {
        text: "a = \"é\"\nb = 1\n",
        origin: "f",
    };
    // Byte 6 is inside `é`.
    assert_eq!(at.line(6), (1, "a = \"é\""));
    assert_eq!(at.line(999), (3, ""));
}

/// The contract's file of two resources, without parent and child: the
/// top level's keys are each resource's defaults.
const TWO: &str = r#"name = "shop"
url = "https://api.example/v1/"
records = "/data"
id = "/id"
updated_at = "/updated_at"
[params]
per_page = "100"
state = "all"
[paginate]
style = "link_header"

[[resource]]
name = "orders"
path = "orders"
params = { state = "open" }

[[resource]]
name = "customers"
url = "https://api.example/v2/customers"
records = "/customers"
[resource.paginate]
style = "cursor"
cursor = "/next"
"#;

#[test]
fn resources_take_the_top_level_as_defaults_and_replace_or_merge_it() {
    let all = Resource::parse_every(TWO, "shop.toml", |_| None).unwrap();
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["orders", "customers"], "file order");
    let (orders, customers) = (&all[0], &all[1]);
    assert_eq!(orders.url.as_str(), "https://api.example/v1/orders");
    assert_eq!(orders.records, Pointer::parse("/data").unwrap());
    assert_eq!(orders.params["state"], "open", "the resource's key wins");
    assert_eq!(orders.params["per_page"], "100", "params merge key by key");
    assert!(shown(orders).starts_with("LinkHeader"), "{}", shown(orders));
    assert_eq!(customers.url.as_str(), "https://api.example/v2/customers");
    assert_eq!(customers.records, Pointer::parse("/customers").unwrap());
    assert!(
        shown(customers).starts_with("Cursor"),
        "a table of its own replaces the default whole: {}",
        shown(customers)
    );
    assert!(customers.updated_at.is_some());
    let e = Resource::parse(TWO, "shop.toml", |_| None).unwrap_err();
    assert!(e.to_string().contains("holds 2 resources"), "{e}");
}

#[test]
fn a_bad_resource_is_named_with_its_key_and_line() {
    let bad = |from: &str, to: &str| {
        Resource::parse_every(&TWO.replace(from, to), "shop.toml", |_| None)
            .unwrap_err()
            .to_string()
    };
    let e = bad("name = \"customers\"", "name = \"orders\"");
    assert!(
        e.contains("line 18") && e.contains("\"orders\" names two resources"),
        "{e}"
    );
    let e = bad("name = \"customers\"", "name = \"Customers\"");
    assert!(e.contains("`name` must be a plain identifier"), "{e}");
    let e = bad(
        "https://api.example/v2/customers",
        "https://elsewhere.example/c",
    );
    assert!(
        e.contains("`resource customers: url` is not on the origin"),
        "{e}"
    );
    let e = bad(
        "path = \"orders\"",
        "path = \"https://elsewhere.example/o\"",
    );
    assert!(
        e.contains("`resource orders: path` does not resolve"),
        "{e}"
    );
    let e = bad("records = \"/data\"\n", "");
    assert!(
        e.contains("`records` is required (by resource orders, or at the top level)"),
        "{e}"
    );
    let e = bad(
        "name = \"orders\"\n",
        "name = \"orders\"\nrecods = \"/x\"\n",
    );
    assert!(e.contains("did you mean `records`?"), "{e}");
    let e = Resource::parse_every(&format!("path = \"x\"\n{BASE}"), "f", |_| None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`path` is a key of a [[resource]]"), "{e}");
}

#[test]
fn every_problem_of_a_file_is_reported_at_once() {
    // Three resources, each wrong in its own way, and a wrong run key: one
    // reading names them all, each with its line.
    let file = r#"name = "shop"
url = "http://127.0.0.1:8080/"
records = "/data"
id = "/id"
concurrency = 0

[[resource]]
name = "orders"
path = "orders"
updated_at = "updated"

[[resource]]
name = "lines"
parent = "orders"
path = "orders/{order}/lines"
method = "PUT"

[[resource]]
name = "Refunds"
path = "refunds"
"#;
    let e = Resource::parse_every(file, "shop.toml", |_| None).unwrap_err();
    let problems = e.problems();
    let said = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(said("shop.toml, line 5: `concurrency`"), "{e}");
    assert!(said("line 10: `updated_at`"), "{e}");
    assert!(said("line 15: `resource lines: {order}`"), "{e}");
    assert!(said("line 16: `method`"), "{e}");
    assert!(said("line 19: `name` must be a plain identifier"), "{e}");
    assert!(problems.len() >= 5, "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{} problems:", problems.len())),
        "{e}"
    );
}

#[test]
fn every_unknown_key_is_named_at_once_with_the_closest_known() {
    let file =
        format!("{BASE}recrods = \"/x\"\n\n[[resource]]\nname = \"a\"\nupdated_ad = \"/u\"\n");
    let e = Resource::parse_every(&file, "f.toml", |_| None).unwrap_err();
    assert_eq!(e.problems().len(), 2, "{e}");
    assert!(
        e.problems()[0]
            .contains("line 5: unknown field `recrods`: not a key of a pipeline file; did you mean `records`?"),
        "{e}"
    );
    assert!(
        e.problems()[1].contains("line 9: unknown field `resource.updated_ad`")
            && e.problems()[1].contains("did you mean `updated_at`?"),
        "{e}"
    );
}

#[test]
fn a_top_level_problem_every_resource_takes_is_reported_once_in_file_order() {
    let file = r#"name = "shop"
url = "http://127.0.0.1:8080/"
records = "data"
id = "/id"
oops = 1

[[resource]]
name = "a"

[[resource]]
name = "b"
"#;
    let e = Resource::parse_every(file, "shop.toml", |_| None).unwrap_err();
    assert_eq!(e.problems().len(), 2, "{e}");
    assert!(e.problems()[0].contains("line 3: `records`"), "{e}");
    assert!(
        e.problems()[1].contains("line 5: unknown field `oops`"),
        "{e}"
    );
}

#[test]
fn the_known_keys_are_the_file_struct_s_fields() {
    let keys = keys();
    assert_eq!(keys.len(), 26, "{keys:?}");
    for key in [
        "name",
        "records",
        "resource",
        "from_parent",
        "concurrency",
        "write",
        "hard_delete",
    ] {
        assert!(keys.contains(&key), "{key}: {keys:?}");
    }
}

#[test]
fn a_table_is_typed_unless_json_and_typed_takes_hints_and_a_schema() {
    assert_eq!(
        parse("").unwrap().shape,
        TableShape::Typed(SchemaOptions::postgres())
    );
    assert_eq!(parse("shape = \"json\"\n").unwrap().shape, TableShape::Json);
    let hinted = parse("[columns]\nprice = \"double\"\n").unwrap();
    assert!(
        matches!(hinted.shape, TableShape::Typed(_)),
        "hints alone: typed"
    );
    let p = parse(
        "shape = \"typed\"\n[columns]\nprice = \"double\"\npayload = \"json\"\n[schema]\ncontract = \"freeze\"\nmax_nesting = 2\n",
    )
    .unwrap();
    let TableShape::Typed(options) = p.shape else {
        panic!("{:?}", p.shape)
    };
    assert_eq!(options.hints.get("price"), Some(&ColumnType::Double));
    assert_eq!(options.hints.get("payload"), Some(&ColumnType::Json));
    assert_eq!(options.contract, Contract::Freeze);
    assert_eq!(options.max_nesting, Some(2));
}

#[test]
fn shape_mistakes_are_named_all_at_once_with_what_was_meant() {
    let e = error(
        "shape = \"typd\"\n[columns]\nprice = \"dobule\"\n_etl_key = \"text\"\n[schema]\ncontract = \"freze\"\n",
    );
    assert!(
        e.contains("`shape` is \"typd\"") && e.contains("did you mean `typed`?"),
        "{e}"
    );
    assert!(
        e.contains("`columns.price` is \"dobule\"") && e.contains("did you mean `double`?"),
        "{e}"
    );
    assert!(
        e.contains("`columns._etl_key` names a loader column"),
        "{e}"
    );
    assert!(
        e.contains("`schema.contract` is \"freze\"") && e.contains("did you mean `freeze`?"),
        "{e}"
    );
    assert!(!e.contains("asks for the JSON shape"), "{e}");
    let e = error("shape = \"typed\"\n[schema]\nmax_nestin = 2\n");
    assert!(
        e.contains("`schema.max_nestin`") && e.contains("did you mean `max_nesting`?"),
        "{e}"
    );
    let e = error("shape = \"json\"\n[columns]\nprice = \"double\"\n");
    assert!(
        e.contains("`shape = \"json\"` asks for the JSON shape"),
        "{e}"
    );
}

#[test]
fn write_dispositions_read_with_the_id_as_the_default_key() {
    use etl_core::content::write::{MergeKeys, Write};
    assert_eq!(parse("").unwrap().write, Write::Append);
    assert_eq!(
        parse("write = \"replace\"\n").unwrap().write,
        Write::Replace
    );
    assert_eq!(
        parse("write = \"merge\"\n").unwrap().write,
        Write::Merge(MergeKeys::new(["/id".parse().unwrap()]))
    );
    assert_eq!(
        parse("write = \"merge\"\nprimary_key = [\"/org\", \"/repo/id\"]\nhard_delete = \"/deleted_at\"\n")
            .unwrap()
            .write,
        Write::Merge(MergeKeys::new(["/org".parse().unwrap(), "/repo/id".parse().unwrap()]).hard_delete("/deleted_at".parse().unwrap()))
    );
    // The top level's keys are every resource's default.
    let many = Resource::parse_every(
        "name = \"gh\"\nurl = \"http://127.0.0.1/\"\nrecords = \"\"\nid = \"/id\"\n\
         write = \"merge\"\nprimary_key = \"/number\"\n\
         [[resource]]\nname = \"issues\"\npath = \"issues\"\n\
         [[resource]]\nname = \"events\"\npath = \"events\"\nwrite = \"append\"\nprimary_key = \"/id\"\n",
        "gh.toml",
        |_| None,
    );
    let e = many.unwrap_err().to_string();
    assert!(
        e.contains("`primary_key` is for `write = \"merge\"`, and the table's is \"append\""),
        "{e}"
    );
}

#[test]
fn write_mistakes_are_named_all_at_once_with_what_was_meant() {
    let e = error("write = \"merj\"\nprimary_key = \"/id\"\n");
    assert!(
        e.contains("`write` is \"merj\": the dispositions are append, merge, replace; did you mean `merge`?"),
        "{e}"
    );
    assert!(
        !e.contains("is for `write"),
        "a misspelt write is named once: {e}"
    );
    let e = error("primary_key = \"/id\"\nhard_delete = \"/deleted\"\n");
    assert!(
        e.contains(
            "line 5: `primary_key` is for `write = \"merge\"`, and the table's is \"append\""
        ),
        "{e}"
    );
    assert!(
        e.contains("line 6: `hard_delete` is for `write = \"merge\"`"),
        "{e}"
    );
    for (write, shape) in [("merge", "json"), ("replace", "json")] {
        let e = error(&format!("write = \"{write}\"\nshape = \"{shape}\"\n"));
        assert!(
            e.contains(&format!("`write = \"{write}\"` makes a typed table"))
                && e.contains("asks for the JSON shape"),
            "{e}"
        );
    }
    let e = error("write = \"merge\"\nprimary_key = \"id\"\nhard_delete = \"\"\n");
    assert!(e.contains("line 6: `primary_key`"), "{e}");
    assert!(
        e.contains("line 7: `hard_delete` is the whole record"),
        "{e}"
    );
    for key in [
        "primary_key = []",
        "primary_key = 5",
        "primary_key = [\"/a\", 1]",
    ] {
        let e = error(&format!("write = \"merge\"\n{key}\n"));
        assert!(
            e.contains("`primary_key` must be a JSON Pointer into the record"),
            "{key}: {e}"
        );
    }
}
