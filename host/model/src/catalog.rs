//! The models a session can choose from and extensions can look up (pi's `ModelRegistry`):
//! the custom models of pi's models.json that pichamber can call, plus the model a session
//! was started with. pi also lists pi-ai's built-in catalog (some 1,700 models); pichamber
//! carries no copy of it, so a lookup of a built-in model that models.json does not define
//! finds nothing.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::models_json::{self, ModelsJson};
use crate::{ModelClient, OpenAiModel};

/// Models by provider and id, in models.json order; cheap to share.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    models: Vec<Arc<ModelClient>>,
}

impl Catalog {
    /// Reads models.json (`path`, or pi's default when it exists). Models pichamber cannot
    /// call (another API) are left out; those without an API key stay, unavailable.
    pub fn load(path: Option<&Path>) -> Self {
        let path = path
            .map(Path::to_path_buf)
            .unwrap_or_else(models_json::default_path);
        // No file is the usual case: answered without building (and discarding) an error,
        // which would capture a backtrace when RUST_BACKTRACE is set.
        if !path.is_file() {
            return Self::default();
        }
        let Ok(file) = ModelsJson::load(&path) else {
            return Self::default();
        };
        let models = file
            .models()
            .into_iter()
            .filter_map(|m| file.openai_config(&m.provider, &m.id).ok())
            .filter_map(|c| OpenAiModel::new(c).ok())
            .map(|m| Arc::new(ModelClient::OpenAi(m)))
            .collect();
        Self { models }
    }

    /// Adds `model` (the one a session starts with) unless the catalog has it already.
    pub fn with(mut self, model: Option<&Arc<ModelClient>>) -> Self {
        if let Some(model) = model
            && self.find(&model.info()).is_none()
        {
            self.models.insert(0, model.clone());
        }
        self
    }

    /// Every model, with or without credentials.
    pub fn all(&self) -> &[Arc<ModelClient>] {
        &self.models
    }

    /// The models a request can authenticate for (pi's `getAvailable`).
    pub fn available(&self) -> impl Iterator<Item = &Arc<ModelClient>> {
        self.models.iter().filter(|m| m.has_api_key())
    }

    /// The model named by a pi-ai `Model`'s `provider` and `id`.
    pub fn find(&self, model: &Value) -> Option<Arc<ModelClient>> {
        let (provider, id) = (model["provider"].as_str()?, model["id"].as_str()?);
        self.get(provider, id)
    }

    pub fn get(&self, provider: &str, id: &str) -> Option<Arc<ModelClient>> {
        self.models
            .iter()
            .find(|m| {
                let info = m.info();
                info["provider"] == provider && info["id"] == id
            })
            .cloned()
    }
}
