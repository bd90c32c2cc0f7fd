//! `pip check`: whether what the environment holds serves every GPU.

use rocm_kpack_get::check::{CheckError, EnvironmentCheck, Invocation};

use super::{environment, machine};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};

impl From<CheckError> for Failure {
    fn from(error: CheckError) -> Failure {
        match error {
            CheckError::Pip(error) => error.into(),
            CheckError::Materialize(error) => error.into(),
        }
    }
}

pub fn check(context: &Context, options: &PipOptions) -> Result<(), Failure> {
    let machine = machine(context)?;
    let env = environment(options.python.as_deref())?;
    // `pip sync` reads no repository: only the GPUs and the environment.
    let invocation = Invocation {
        global: context.target_args(),
        python: options.python.clone(),
        all_targets: options.all_targets,
    };
    let report = EnvironmentCheck {
        env: &env,
        gpus: &machine.reported,
        all_targets: options.all_targets,
        invocation: &invocation,
    }
    .run()?
    .with_warnings(machine.strict_warnings);
    context.printer.report(&report);
    report.render_text(&context.printer);
    Failure::unless_served(&report)
}
