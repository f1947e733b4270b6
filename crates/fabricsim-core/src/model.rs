//! The model a scenario names (`mode`): one entry for every caller, so that
//! a flow-mode scenario never runs the packet model by accident.

use crate::error::ScenarioError;
use crate::fluid::{FluidSimulation, Mode};
use crate::metrics::RunOutput;
use crate::scenario::Scenario;
use crate::sim::{Progress, Setup, Simulation};

pub enum Model {
    Packet(Simulation),
    Flow(FluidSimulation),
}

impl Model {
    /// Builds the model `scenario.mode` names, as `setup` says; `Ok(None)`
    /// when its hook stopped the build.
    pub fn build(scenario: Scenario, setup: &mut Setup<'_>) -> Result<Option<Model>, ScenarioError> {
        scenario.check_sends_something()?;
        Ok(match scenario.mode {
            Mode::Packet => Simulation::new_within(scenario, setup)?.map(Model::Packet),
            Mode::Flow => FluidSimulation::new_within(scenario, setup)?.map(Model::Flow),
        })
    }

    /// Checks `scenario` as `build` would, within `setup`, keeping nothing;
    /// `Ok(false)` when its hook stopped the check. A scenario that sends
    /// nothing passes: its topology can still be reported.
    pub fn check(scenario: &Scenario, setup: &mut Setup<'_>) -> Result<bool, ScenarioError> {
        match scenario.mode {
            Mode::Packet => Simulation::check_within(scenario, setup),
            Mode::Flow => FluidSimulation::check_within(scenario, setup),
        }
    }

    /// Runs to the end (or until `hook` returns false).
    pub fn run(&mut self, hook: &mut dyn FnMut(Progress) -> bool) -> RunOutput {
        match self {
            Model::Packet(sim) => sim.run(hook),
            Model::Flow(sim) => sim.run(hook),
        }
    }
}
