//! `Launch` against real Launch Library 2 objects, in both API versions.
//!
//! The data files are real API responses (copied from the project's shared
//! fixtures, which a fresh clone does not have): the `results` of a 2.3.0
//! `/launches/upcoming/` page and a whole 2.2.0 `/launch/upcoming/` page.

#![cfg(feature = "content")]

use etl_core::{Launch, Row};
use serde_json::{json, Value};

const V230_RESULTS: &str = include_str!("data/ll2-2.3.0-upcoming-results.json");
const V220_PAGE: &str = include_str!("data/ll2-2.2.0-upcoming-page.json");

fn v230() -> Vec<Value> {
    serde_json::from_str(V230_RESULTS).unwrap()
}

/// The 2.2.0 rendition of a 2.3.0 launch object: each field whose wire type
/// changed between the versions (the fixtures' README table), written back
/// the way 2.2.0 sends it.
fn as_2_2_0(mut launch: Value) -> Value {
    let image_url = launch["image"]["image_url"].clone();
    launch["image"] = image_url;
    let provider = &mut launch["launch_service_provider"];
    let kind = provider["type"]["name"].clone();
    provider["type"] = kind;
    let pad = &mut launch["pad"];
    for axis in ["latitude", "longitude"] {
        let degrees = pad[axis].as_f64().expect("2.3.0 sends numbers");
        pad[axis] = json!(degrees.to_string());
    }
    let location = &mut pad["location"];
    let code = location["country"]["alpha_3_code"].clone();
    location.as_object_mut().unwrap().remove("country");
    location["country_code"] = code;
    let config = &mut launch["rocket"]["configuration"];
    let family = config["families"][0]["name"].clone();
    config.as_object_mut().unwrap().remove("families");
    config["family"] = if family.is_null() { json!("") } else { family };
    launch
}

#[test]
fn every_real_2_3_0_object_reads_and_round_trips() {
    let objects = v230();
    assert_eq!(objects.len(), 10);
    for object in objects {
        let text = object.to_string();
        let launch: Launch =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", object["name"]));
        let again: Launch = serde_json::from_str(&serde_json::to_string(&launch).unwrap()).unwrap();
        assert_eq!(again, launch);
        // The facts 2.3.0 moved into objects are there.
        assert!(launch.image.as_deref().unwrap().starts_with("https://"));
        let provider = launch.launch_service_provider.as_ref().unwrap();
        assert_eq!(provider.kind.as_deref(), Some("Commercial"));
        let pad = launch.pad.as_ref().unwrap();
        assert!(pad.latitude.is_some() && pad.longitude.is_some());
        let location = pad.location.as_ref().unwrap();
        assert_eq!(location.country_code.as_deref().map(str::len), Some(3));
        let config = launch
            .rocket
            .as_ref()
            .unwrap()
            .configuration
            .as_ref()
            .unwrap();
        assert!(config.family.is_some(), "{}", launch.name);
    }
}

#[test]
fn the_same_facts_in_2_2_0_and_2_3_0_give_equal_launches_and_keys() {
    for object in v230() {
        let old = as_2_2_0(object.clone());
        let new: Launch = serde_json::from_value(object).unwrap();
        let old: Launch = serde_json::from_value(old).unwrap();
        assert_eq!(old, new);
        assert_eq!(
            Row::Launches(old).content_key().unwrap(),
            Row::Launches(new).content_key().unwrap()
        );
    }
}

#[test]
fn falcon_family_reads_the_same_from_both_versions() {
    let falcon = v230()
        .into_iter()
        .find(|l| {
            l["rocket"]["configuration"]["families"]
                .as_array()
                .unwrap()
                .len()
                == 2
        })
        .unwrap();
    let launch: Launch = serde_json::from_value(falcon).unwrap();
    let config = launch.rocket.unwrap().configuration.unwrap();
    assert_eq!(config.family.as_deref(), Some("Falcon"));

    // No family: 2.2.0's "" and 2.3.0's [] are one value, 2.2.0's.
    let empty_220: Launch = serde_json::from_value(
        json!({"id": "x", "name": "y", "rocket": {"configuration": {"family": ""}}}),
    )
    .unwrap();
    let empty_230: Launch = serde_json::from_value(
        json!({"id": "x", "name": "y", "rocket": {"configuration": {"families": []}}}),
    )
    .unwrap();
    assert_eq!(empty_220, empty_230);
    assert_eq!(
        empty_220
            .rocket
            .unwrap()
            .configuration
            .unwrap()
            .family
            .as_deref(),
        Some("")
    );
}

#[test]
fn every_real_2_2_0_object_still_reads() {
    let page: Value = serde_json::from_str(V220_PAGE).unwrap();
    let results = page["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for object in results {
        let launch: Launch = serde_json::from_value(object.clone()).unwrap();
        let provider = launch.launch_service_provider.unwrap();
        assert_eq!(
            provider.kind.as_deref(),
            object["launch_service_provider"]["type"].as_str()
        );
        let location = launch.pad.unwrap().location.unwrap();
        assert_eq!(
            location.country_code.as_deref(),
            object["pad"]["location"]["country_code"].as_str()
        );
    }
}

#[test]
fn list_mode_names_read_as_objects_holding_the_name() {
    // mode=list sends some nested objects as bare names.
    let launch: Launch = serde_json::from_value(json!({
        "id": "x", "name": "y", "pad": "Launch Complex 39A",
        "mission": "Starlink Group 10-1", "launch_service_provider": "SpaceX"
    }))
    .unwrap();
    assert_eq!(
        launch.pad.unwrap().name.as_deref(),
        Some("Launch Complex 39A")
    );
    assert_eq!(
        launch.mission.unwrap().name.as_deref(),
        Some("Starlink Group 10-1")
    );
    assert_eq!(
        launch.launch_service_provider.unwrap().name.as_deref(),
        Some("SpaceX")
    );
}

#[test]
fn an_unknown_type_in_a_known_field_is_an_error_naming_it() {
    let e = serde_json::from_value::<Launch>(json!({
        "id": "x", "name": "y", "pad": {"latitude": "north-ish"}
    }))
    .unwrap_err();
    assert!(e.to_string().contains("north-ish"), "{e}");
    let e = serde_json::from_value::<Launch>(json!({
        "id": "x", "name": "y", "launch_service_provider": {"type": 3}
    }))
    .unwrap_err();
    assert!(
        e.to_string().contains("an object, a name string or null"),
        "{e}"
    );
}
