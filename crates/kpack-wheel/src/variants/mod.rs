//! Wheel variants (PEP 825 and the providers draft): properties, the
//! metadata documents describing labels, AMD's properties, and choosing the
//! best variant for a machine.

pub mod amd;
mod document;
mod order;
mod property;

pub use document::{
    index_filename, parse_index_filename, Provider, SchemaVersion, VariantsDocument, VariantsError,
    VariantsFileError, SCHEMA_0_1_1, SCHEMA_0_2_0,
};
pub use order::{order_candidates, Candidate, SupportedProperties};
pub use property::{InvalidProperty, VariantProperties, VariantProperty};
