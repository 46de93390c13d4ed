//! A tool's parameter schema (written by an extension) and the arguments of a call (written by
//! the model) are both hostile: validating and coercing any pair must not panic. The input
//! is a schema and arguments, two JSON texts separated by a NUL byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber_session::state::RegisteredTool;
use pichamber_session::tool_calls::validate_arguments;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |b| *b == 0);
    let (Some(schema), Some(args)) = (parts.next(), parts.next()) else {
        return;
    };
    let (Ok(schema), Ok(args)) = (
        serde_json::from_slice::<serde_json::Value>(schema),
        serde_json::from_slice::<serde_json::Value>(args),
    ) else {
        return;
    };
    // The host refuses, at registration, schemas too costly to validate: only those it
    // accepts reach validation.
    if !schema.is_object() || pichamber_runtime::schema_cost::check_schema_cost(&schema).is_err() {
        return;
    }
    let tool = RegisteredTool {
        source: pichamber_session::state::ToolSource::Builtin,
        extension_name: String::new(),
        name: "fuzz".into(),
        label: "fuzz".into(),
        description: String::new(),
        parameters: schema,
        prompt_snippet: None,
        prompt_guidelines: Vec::new(),
        has_prepare_arguments: false,
        execution_mode: None,
        constrained_sampling: None,
        exposure: Default::default(),
        default_active: None,
        namespace: None,
        annotations: None,
        validator: Default::default(),
    };
    // Both releases' loosening and wording (pi 1.6.0's is pichamber's pi_schema).
    for pi in pichamber_session::PiVersion::ALL {
        let _ = validate_arguments(&tool, &args, pi);
    }
});
