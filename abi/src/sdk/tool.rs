//! Tools: the typed [`Tool`] every shipped plugin implements, and the raw registration under it.

use abi_stable::sabi_trait::TD_Opaque;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::glue::ToolGlue;
use super::host::{Host, text_result};
use super::plugin::Handler;
use super::typed;
use crate::ffi::{ToolCall, ToolHandler_TO, ToolResult, ToolSpec};

/// A tool a plugin serves: its name and description, its arguments as a Rust type (the input schema
/// is generated from it, and a call whose arguments do not fit is answered with an error naming the
/// argument without running the tool), and what a call does.
pub trait Tool: Send + Sync + 'static {
    /// The arguments of a call.
    type Args: DeserializeOwned + JsonSchema;
    /// The tool's name, unique across the loaded plugins.
    fn name(&self) -> &str;
    /// What the model is told the tool does.
    fn description(&self) -> String;
    /// Adjusts the schema generated from [`Tool::Args`] (hide an argument this deployment turned
    /// off, say). The default leaves it as generated.
    fn adjust_schema(&self, schema: &mut Value) {
        let _ = schema;
    }
    /// Handles one call whose arguments parsed.
    fn run(&self, call: &ToolCall, args: Self::Args) -> ToolResult;
}

/// The arguments of a tool that takes none (any object is accepted).
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Default)]
pub struct NoArgs {}

impl Host {
    /// Registers `tool`.
    ///
    /// # Errors
    /// As [`Host::register_tool`].
    pub fn register<T: Tool>(&self, tool: T) -> Result<(), String> {
        let mut schema = typed::schema::<T::Args>();
        tool.adjust_schema(&mut schema);
        let (name, description) = (tool.name().to_owned(), tool.description());
        self.register_tool(
            &name,
            &description,
            schema,
            move |call: &ToolCall| match typed::parse::<T::Args>(call.arguments()) {
                Ok(args) => tool.run(call, args),
                Err(e) => ToolResult::error(e),
            },
        )
    }

    /// Registers a tool with a hand-written `schema` and a raw `handler` (its arguments as JSON text).
    ///
    /// # Errors
    /// The host's refusal (a name already taken, a schema that is not a JSON object).
    pub fn register_tool(
        &self,
        name: &str,
        description: &str,
        schema: Value,
        handler: impl Handler,
    ) -> Result<(), String> {
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema_json: schema.to_string().into(),
        };
        let handler = ToolHandler_TO::from_value(ToolGlue(handler), TD_Opaque);
        text_result(self.0.register_tool(spec, handler))
    }

    /// Unregisters one of this plugin's tools.
    pub fn unregister_tool(&self, name: &str) {
        self.0.unregister_tool(name.into());
    }
}
