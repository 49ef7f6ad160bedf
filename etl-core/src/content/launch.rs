//! [`Launch`]: a Launch Library 2 launch, narrowed to the fields an analyst
//! keeps, readable from both the 2.2.0 and the 2.3.0 wire shapes.
//!
//! The nested structs mirror the API's own nesting, so a `Launch` serialises
//! to a (smaller) launch object of the same shape and reads back to an equal
//! value. Fields that changed type between API versions are read both ways:
//! `image` (2.2.0: URL string; 2.3.0: object with `image_url`), the pad's
//! `latitude`/`longitude` (2.2.0: decimal string; 2.3.0: number), the
//! provider's `type` (2.2.0: `"Commercial"`; 2.3.0: `{"id": 3, "name":
//! "Commercial"}`), the rocket family (2.2.0: `family`; 2.3.0: `families`)
//! and the location's country (2.2.0: `country_code`; 2.3.0: `country`).
//! The same fact read from either version gives the same value, so a launch
//! keeps its content key when a pipeline moves from 2.2.0 to 2.3.0.
//!
//! # Modes
//! - `mode=normal` (the default) and `mode=detailed` (a superset of normal)
//!   read in full.
//! - `mode=list` sends fewer fields, and some nested objects as a bare name
//!   (2.2.0's `pad` and `location` are strings there): a nested object sent
//!   as a string is read as one holding only that `name`, and a field the
//!   mode leaves out is `None`. Such launches hash differently from the same
//!   launch read in normal mode, so keep one mode per output.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// One launch, as Launch Library 2 describes it, narrowed to the fields kept.
///
/// Unknown fields are ignored; every field but `id` and `name` may be absent
/// or `null` (2.2.0 allows `null` for `status` and `net`).
///
/// ```
/// use etl_core::Launch;
///
/// let wire = r#"{"id":"e92f","name":"Falcon 9 | Starlink","net":"2025-10-31T20:41:10Z",
///   "image":{"image_url":"https://img.example/f9.png","credit":"SpaceX"},
///   "pad":{"id":16,"name":"SLC-4E","latitude":"34.632","longitude":-120.611},
///   "webcast_live":false}"#;
/// let launch: Launch = serde_json::from_str(wire)?;
/// assert_eq!(launch.image.as_deref(), Some("https://img.example/f9.png"));
/// assert_eq!(launch.pad.as_ref().and_then(|p| p.latitude), Some(34.632));
///
/// // Our own serialised form reads back to an equal value.
/// let again: Launch = serde_json::from_str(&serde_json::to_string(&launch)?)?;
/// assert_eq!(again, launch);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// The launch's UUID.
    pub id: String,
    /// Display name, `"<rocket> | <mission>"`.
    pub name: String,
    /// URL slug.
    #[serde(default)]
    pub slug: Option<String>,
    /// Go / TBD / Success / Failure ...
    #[serde(default)]
    pub status: Option<Status>,
    /// "No earlier than": the planned or actual launch time (ISO 8601, UTC).
    #[serde(default)]
    pub net: Option<String>,
    /// Start of the launch window (ISO 8601, UTC).
    #[serde(default)]
    pub window_start: Option<String>,
    /// End of the launch window (ISO 8601, UTC).
    #[serde(default)]
    pub window_end: Option<String>,
    /// Launch probability in percent, when the provider published one.
    #[serde(default)]
    pub probability: Option<i32>,
    /// The agency or company that provides the launch.
    #[serde(default, deserialize_with = "object_or_name")]
    pub launch_service_provider: Option<Agency>,
    /// The vehicle.
    #[serde(default)]
    pub rocket: Option<Rocket>,
    /// What is launched, and where to.
    #[serde(default, deserialize_with = "object_or_name")]
    pub mission: Option<Mission>,
    /// Where it launches from.
    #[serde(default, deserialize_with = "object_or_name")]
    pub pad: Option<Pad>,
    /// URL of the launch's image (2.3.0's image object collapsed to its URL).
    #[serde(default, deserialize_with = "image_url")]
    pub image: Option<String>,
    /// When the API last changed this launch (ISO 8601, UTC).
    #[serde(default)]
    pub last_updated: Option<String>,
}

/// A launch's status (`Go`, `TBD`, `Success`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// The API's status id.
    pub id: Option<u32>,
    /// Long name, e.g. "Go for Launch".
    pub name: Option<String>,
    /// Short name, e.g. "Go".
    pub abbrev: Option<String>,
}

/// An agency or company.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Agency {
    /// The API's agency id.
    pub id: Option<u64>,
    /// Name, e.g. "SpaceX".
    pub name: Option<String>,
    /// "Commercial", "Government", ... (2.3.0's `{"id", "name"}` object is
    /// read as its `name`).
    #[serde(rename = "type", deserialize_with = "name_of")]
    pub kind: Option<String>,
}

/// The launch vehicle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rocket {
    /// The API's rocket id (this vehicle instance).
    pub id: Option<u64>,
    /// The vehicle's configuration (model).
    pub configuration: Option<RocketConfiguration>,
}

/// A launcher configuration, e.g. "Falcon 9 Block 5".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, from = "ConfigurationWire")]
pub struct RocketConfiguration {
    /// The API's configuration id.
    pub id: Option<u64>,
    /// Name, e.g. "Falcon 9".
    pub name: Option<String>,
    /// Full name, e.g. "Falcon 9 Block 5".
    pub full_name: Option<String>,
    /// The family the vehicle belongs to, e.g. "Falcon": 2.2.0's `family`,
    /// or the first (broadest) entry of 2.3.0's `families` list (which for a
    /// Falcon 9 reads `["Falcon", "Falcon 9"]`, while 2.2.0 says `"Falcon"`).
    /// No family is `Some("")`, as 2.2.0 sends it (`""`) and as 2.3.0's
    /// empty list `[]` is read: outputs written from 2.2.0 keep their keys.
    pub family: Option<String>,
    /// Variant, e.g. "Block 5".
    pub variant: Option<String>,
}

/// The mission a launch flies.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Mission {
    /// The API's mission id.
    pub id: Option<u64>,
    /// Name, e.g. "Starlink Group 11-23".
    pub name: Option<String>,
    /// Free-text description.
    pub description: Option<String>,
    /// "Communications", "Earth Science", ...
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The target orbit.
    pub orbit: Option<Orbit>,
}

/// A target orbit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Orbit {
    /// The API's orbit id.
    pub id: Option<u32>,
    /// Name, e.g. "Low Earth Orbit".
    pub name: Option<String>,
    /// Abbreviation, e.g. "LEO".
    pub abbrev: Option<String>,
}

/// A launch pad.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pad {
    /// The API's pad id.
    pub id: Option<u64>,
    /// Name, e.g. "Space Launch Complex 4E".
    pub name: Option<String>,
    /// Latitude in degrees (2.2.0 sends a string, 2.3.0 a number).
    #[serde(deserialize_with = "degrees")]
    pub latitude: Option<f64>,
    /// Longitude in degrees (2.2.0 sends a string, 2.3.0 a number).
    #[serde(deserialize_with = "degrees")]
    pub longitude: Option<f64>,
    /// The site the pad belongs to.
    pub location: Option<Location>,
}

/// A launch site.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, from = "LocationWire")]
pub struct Location {
    /// The API's location id.
    pub id: Option<u64>,
    /// Name, e.g. "Vandenberg SFB, CA, USA".
    pub name: Option<String>,
    /// ISO 3166 alpha-3 country code: 2.2.0's `country_code`, or 2.3.0's
    /// `country.alpha_3_code`.
    pub country_code: Option<String>,
}

/// 2.2.0 sends `"34.632"`, 2.3.0 sends `34.632`; both (and `null`) are read.
fn degrees<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Number(f64),
        Text(String),
    }
    match Option::<Wire>::deserialize(d)? {
        None => Ok(None),
        Some(Wire::Number(x)) => Ok(Some(x)),
        Some(Wire::Text(s)) if s.trim().is_empty() => Ok(None),
        Some(Wire::Text(s)) => match s.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(serde::de::Error::custom(format_args!(
                "coordinate {s:?} is not a decimal number of degrees"
            ))),
        },
    }
}

/// 2.2.0 sends the image URL, 2.3.0 an object holding it in `image_url`.
fn image_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Url(String),
        Object { image_url: Option<String> },
    }
    Ok(match Option::<Wire>::deserialize(d)? {
        None => None,
        Some(Wire::Url(url)) => Some(url),
        Some(Wire::Object { image_url }) => image_url,
    })
}

/// What 2.2.0 and 2.3.0 send for a launcher configuration.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ConfigurationWire {
    id: Option<u64>,
    name: Option<String>,
    full_name: Option<String>,
    family: Option<String>,
    families: Option<Vec<Named>>,
    variant: Option<String>,
}

impl From<ConfigurationWire> for RocketConfiguration {
    fn from(w: ConfigurationWire) -> Self {
        // 2.3.0's `[]` reads as 2.2.0's `""`, so both versions (and every
        // output written from 2.2.0) agree on the key of a family-less rocket.
        let family = w.family.or_else(|| {
            w.families.map(|f| {
                f.into_iter()
                    .next()
                    .and_then(|n| n.name)
                    .unwrap_or_default()
            })
        });
        RocketConfiguration {
            id: w.id,
            name: w.name,
            full_name: w.full_name,
            family,
            variant: w.variant,
        }
    }
}

/// What 2.2.0 and 2.3.0 send for a location.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LocationWire {
    id: Option<u64>,
    name: Option<String>,
    country_code: Option<String>,
    country: Option<Country>,
}

/// 2.3.0's country object; only its alpha-3 code is kept.
#[derive(Deserialize)]
struct Country {
    alpha_3_code: Option<String>,
}

impl From<LocationWire> for Location {
    fn from(w: LocationWire) -> Self {
        Location {
            id: w.id,
            name: w.name,
            country_code: w
                .country_code
                .or_else(|| w.country.and_then(|c| c.alpha_3_code)),
        }
    }
}

/// An `{id, name}` object of 2.3.0 (agency type, rocket family).
#[derive(Deserialize)]
struct Named {
    name: Option<String>,
}

/// A nested object that may also arrive as its bare name.
trait FromName {
    fn from_name(name: String) -> Self;
}

impl FromName for Named {
    fn from_name(name: String) -> Self {
        Named { name: Some(name) }
    }
}

macro_rules! from_name {
    ($($ty:ty),*) => {$(
        impl FromName for $ty {
            fn from_name(name: String) -> Self {
                Self { name: Some(name), ..Default::default() }
            }
        }
    )*};
}
from_name!(Agency, Mission, Pad);

/// `"Commercial"` (2.2.0) or `{"id": 3, "name": "Commercial"}` (2.3.0).
fn name_of<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(object_or_name::<D, Named>(d)?.and_then(|n| n.name))
}

/// A nested object, or (`mode=list`) just its name. A visitor rather than an
/// untagged enum: the object's own errors (a bad coordinate, say) come out as
/// they are, with their field path, instead of "did not match any variant".
fn object_or_name<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + FromName,
{
    struct Visit<T>(std::marker::PhantomData<T>);

    impl<'de, T: Deserialize<'de> + FromName> Visitor<'de> for Visit<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object, a name string or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
            Ok(Some(T::from_name(name.to_owned())))
        }
        fn visit_string<E: de::Error>(self, name: String) -> Result<Self::Value, E> {
            Ok(Some(T::from_name(name)))
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }

    d.deserialize_option(Visit(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2.2.0 launch object as the API returns it (trimmed from a real
    /// response: the nested objects keep fields we drop, to prove they are
    /// ignored).
    const V220: &str = r#"{
      "id": "e92f090c-cb6a-4e1a-8e07-5a97dbf1c450",
      "url": "https://ll.thespacedevs.com/2.2.0/launch/e92f090c-cb6a-4e1a-8e07-5a97dbf1c450/",
      "slug": "falcon-9-block-5-starlink-group-11-23",
      "name": "Falcon 9 Block 5 | Starlink Group 11-23",
      "status": {"id": 3, "name": "Launch Successful", "abbrev": "Success", "description": "..."},
      "last_updated": "2025-11-01T00:17:41Z",
      "net": "2025-10-31T20:41:10Z",
      "window_end": "2025-10-31T23:44:00Z",
      "window_start": "2025-10-31T19:44:00Z",
      "net_precision": {"id": 0, "name": "Second", "abbrev": "SEC"},
      "probability": null,
      "holdreason": "",
      "launch_service_provider": {"id": 121, "url": "https://ll.thespacedevs.com/2.2.0/agencies/121/", "name": "SpaceX", "type": "Commercial"},
      "rocket": {"id": 8774, "configuration": {"id": 164, "name": "Falcon 9", "family": "Falcon", "full_name": "Falcon 9 Block 5", "variant": "Block 5"}},
      "mission": {"id": 7365, "name": "Starlink Group 11-23", "description": "A batch of 28 satellites.", "launch_designator": null, "type": "Communications",
                  "orbit": {"id": 8, "name": "Low Earth Orbit", "abbrev": "LEO"}, "agencies": [{"id": 121}], "info_urls": [], "vid_urls": []},
      "pad": {"id": 16, "agency_id": null, "name": "Space Launch Complex 4E", "latitude": "34.632", "longitude": "-120.611",
              "location": {"id": 11, "name": "Vandenberg SFB, CA, USA", "country_code": "USA", "total_launch_count": 842}},
      "webcast_live": false,
      "image": "https://example.invalid/falcon9.png",
      "program": [{"id": 25, "name": "Starlink"}]
    }"#;

    /// The same launch in 2.3.0's shape: image object, numeric coordinates.
    const V230: &str = r#"{
      "id": "e92f090c-cb6a-4e1a-8e07-5a97dbf1c450",
      "slug": "falcon-9-block-5-starlink-group-11-23",
      "name": "Falcon 9 Block 5 | Starlink Group 11-23",
      "status": {"id": 3, "name": "Launch Successful", "abbrev": "Success"},
      "last_updated": "2025-11-01T00:17:41Z",
      "net": "2025-10-31T20:41:10Z",
      "window_end": "2025-10-31T23:44:00Z",
      "window_start": "2025-10-31T19:44:00Z",
      "probability": null,
      "launch_service_provider": {"id": 121, "name": "SpaceX", "type": "Commercial"},
      "rocket": {"id": 8774, "configuration": {"id": 164, "name": "Falcon 9", "family": "Falcon", "full_name": "Falcon 9 Block 5", "variant": "Block 5"}},
      "mission": {"id": 7365, "name": "Starlink Group 11-23", "description": "A batch of 28 satellites.", "type": "Communications",
                  "orbit": {"id": 8, "name": "Low Earth Orbit", "abbrev": "LEO"}},
      "pad": {"id": 16, "name": "Space Launch Complex 4E", "latitude": 34.632, "longitude": -120.611,
              "location": {"id": 11, "name": "Vandenberg SFB, CA, USA", "country_code": "USA"}},
      "image": {"id": 1, "name": "Falcon 9", "image_url": "https://example.invalid/falcon9.png", "thumbnail_url": "https://example.invalid/t.png"}
    }"#;

    #[test]
    fn reads_2_2_0_and_2_3_0_to_the_same_launch() {
        let old: Launch = serde_json::from_str(V220).unwrap();
        let new: Launch = serde_json::from_str(V230).unwrap();
        assert_eq!(old, new);
        assert_eq!(old.name, "Falcon 9 Block 5 | Starlink Group 11-23");
        let pad = old.pad.as_ref().unwrap();
        assert_eq!(
            (pad.latitude, pad.longitude),
            (Some(34.632), Some(-120.611))
        );
        assert_eq!(
            old.image.as_deref(),
            Some("https://example.invalid/falcon9.png")
        );
        let orbit = old.mission.as_ref().and_then(|m| m.orbit.as_ref()).unwrap();
        assert_eq!(orbit.abbrev.as_deref(), Some("LEO"));
        assert_eq!(
            old.launch_service_provider
                .as_ref()
                .and_then(|a| a.kind.as_deref()),
            Some("Commercial")
        );
    }

    #[test]
    fn own_serialised_form_reads_back_equal() {
        let launch: Launch = serde_json::from_str(V220).unwrap();
        let text = serde_json::to_string(&launch).unwrap();
        assert_eq!(serde_json::from_str::<Launch>(&text).unwrap(), launch);
    }

    #[test]
    fn nulls_and_missing_fields_are_none() {
        let l: Launch = serde_json::from_str(
            r#"{"id":"x","name":"y","status":null,"net":null,"image":null,
                "pad":{"latitude":null,"longitude":""}}"#,
        )
        .unwrap();
        assert_eq!(l.status, None);
        assert_eq!(l.net, None);
        assert_eq!(l.image, None);
        let pad = l.pad.unwrap();
        assert_eq!((pad.latitude, pad.longitude), (None, None));
    }

    #[test]
    fn bad_coordinates_are_an_error_naming_the_value() {
        let err = serde_json::from_str::<Launch>(
            r#"{"id":"x","name":"y","pad":{"latitude":"north-ish"}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("north-ish"), "{err}");
    }

    #[test]
    fn id_and_name_are_required() {
        assert!(serde_json::from_str::<Launch>(r#"{"name":"y"}"#).is_err());
        assert!(serde_json::from_str::<Launch>(r#"{"id":"x"}"#).is_err());
    }
}
