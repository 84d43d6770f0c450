//! Why an engine could not do what a run asked. Each variant's text says everything (its
//! cause included), so the fields that carry a cause are not chained as `source` too.

use crate::model::ServerKey;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the Docker engine does not answer at {at}: {error}")]
    NoEngine {
        at: String,
        error: bollard::errors::Error,
    },
    #[error("the Docker engine stopped answering at {at} mid-run: {error}")]
    Lost {
        at: String,
        error: bollard::errors::Error,
    },
    #[error("{what}: {error}")]
    Docker {
        what: String,
        error: bollard::errors::Error,
    },
    #[error("--no-build: image {0} is missing (run `bench-runner build-images` first)")]
    MissingImage(&'static str),
    #[error("{0}: cmd: servers run natively (--engine native); under Docker give image:IMAGE")]
    CmdUnderDocker(ServerKey),
    #[error("{key}: image:{image} needs a Docker engine (native mode runs cmd: servers)")]
    ImageNatively { key: ServerKey, image: String },
    #[error("--network bridge needs a Docker engine (native mode has no networks)")]
    BridgeNatively,
    #[error("starting {what}: {error}")]
    Spawn { what: String, error: std::io::Error },
    #[error("the no-io-uring filter: {0}")]
    Sandbox(#[from] sandbox::Error),
    #[error("{0}")]
    Build(#[from] super::build::BuildError),
    #[error("the server container has no address on {0}")]
    NoAddress(String),
    #[error("a build task stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl EngineError {
    /// A Docker API call that failed, named by what it was for.
    pub fn docker(what: impl Into<String>) -> impl FnOnce(bollard::errors::Error) -> EngineError {
        let what = what.into();
        move |error| EngineError::Docker { what, error }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
