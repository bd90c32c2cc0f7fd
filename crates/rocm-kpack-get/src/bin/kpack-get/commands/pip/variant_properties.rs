//! `pip variant-properties`: the variant properties this machine
//! supports, most preferred first, as JSON.

use serde::Serialize;

use super::{machine, MachineReport};
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

/// `pip variant-properties`'s document (printed with or without --json).
#[derive(Debug, Serialize)]
struct PropertiesReport {
    schema: u32,
    machine: MachineReport,
    properties: Vec<String>,
}

/// `pip variant-properties`: the supported properties, as JSON.
pub fn variant_properties(context: &Context) -> Result<(), Failure> {
    let machine = machine(context)?;
    let properties: Vec<String> = machine
        .supported()?
        .properties()
        .iter()
        .map(ToString::to_string)
        .collect();
    let document = PropertiesReport {
        schema: SCHEMA,
        machine: machine.report(),
        properties,
    };
    if context.printer.json {
        context.printer.report(&document);
    } else {
        context
            .printer
            .line(serde_json::to_string_pretty(&document).unwrap_or_default());
    }
    Ok(())
}
