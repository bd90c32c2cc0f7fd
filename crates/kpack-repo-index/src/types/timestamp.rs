//! Points in time, as TOML datetimes in UTC.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, written as a TOML datetime in UTC
/// (`2026-11-21T10:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub jiff::Timestamp);

impl Timestamp {
    /// Seconds since the Unix epoch.
    pub fn from_second(seconds: i64) -> Option<Timestamp> {
        jiff::Timestamp::from_second(seconds).ok().map(Timestamp)
    }

    pub fn now() -> Timestamp {
        Timestamp(jiff::Timestamp::now())
    }

    pub fn as_second(&self) -> i64 {
        self.0.as_second()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Whole seconds, UTC, as the index writes them.
        write!(f, "{}", self.0.strftime("%Y-%m-%dT%H:%M:%SZ"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let datetime: toml::value::Datetime = self
            .to_string()
            .parse()
            .map_err(serde::ser::Error::custom)?;
        datetime.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let datetime = toml::value::Datetime::deserialize(deserializer)?;
        if datetime.date.is_none() || datetime.time.is_none() || datetime.offset.is_none() {
            return Err(serde::de::Error::custom(
                "a timestamp needs a date, a time and a UTC offset (2026-11-21T10:00:00Z)",
            ));
        }
        datetime
            .to_string()
            .parse::<jiff::Timestamp>()
            .map(Timestamp)
            .map_err(serde::de::Error::custom)
    }
}
