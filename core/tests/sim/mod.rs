//! The deterministic simulation of the engine: model Redis nodes, a seeded network and
//! scheduler, contending clients, and a safety checker over what the clients believed.

pub(crate) mod checker;
pub(crate) mod node;
pub(crate) mod rng;
pub(crate) mod scenario;
pub(crate) mod world;
