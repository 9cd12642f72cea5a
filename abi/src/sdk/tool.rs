//! Tools: the typed [`Tool`] every shipped plugin implements, and the raw registration under it.

use abi_stable::sabi_trait::TD_Opaque;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::glue::ToolGlue;
use super::host::{Host, host_result};
use super::plugin::Handler;
use super::typed;
use crate::ffi::{HostError, ToolCall, ToolHandler_TO, ToolResult, ToolSpec};

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
    /// More of the tool's MCP description (see [`ToolSpec::mcp_json`]); none by default.
    fn mcp_fields(&self) -> Value {
        Value::Object(serde_json::Map::new())
    }
    /// Handles one call whose arguments parsed.
    fn run(&self, call: &ToolCall, args: Self::Args) -> ToolResult;
}

/// What a tool adds to its MCP description when MCP clients may run it as a task: the host runs
/// the call as a task of its own.
pub fn runs_as_task() -> Value {
    serde_json::json!({"execution": {"taskSupport": "optional"}})
}

/// What a producer tool adds to its MCP description when MCP clients may run it as a task and it
/// starts background tasks itself: called with `run_in_background: true`, it answers with
/// [`ToolResult::started`] (the text worded as it likes), and the task it names there is the MCP
/// task (its output readable with `task_output` while it runs, its exit code its result's
/// `isError`). An answer that names no task is refused with its text.
pub fn runs_in_background_as_task() -> Value {
    serde_json::json!({
        "execution": {"taskSupport": "optional"},
        "_meta": {"taskhost/background": {"run_in_background": true}},
    })
}

/// The arguments of a tool that takes none (any object is accepted).
#[derive(serde::Deserialize, schemars::JsonSchema, Debug, Default)]
pub struct NoArgs {}

impl Host {
    /// Registers `tool`.
    ///
    /// # Errors
    /// As [`Host::register_tool`].
    pub fn register<T: Tool>(&self, tool: T) -> Result<(), HostError> {
        let mut schema = typed::schema::<T::Args>();
        tool.adjust_schema(&mut schema);
        let (name, description, fields) = (
            tool.name().to_owned(),
            tool.description(),
            tool.mcp_fields(),
        );
        self.register_tool_with(
            &name,
            &description,
            schema,
            fields,
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
    ) -> Result<(), HostError> {
        self.register_tool_with(
            name,
            description,
            schema,
            Value::Object(serde_json::Map::new()),
            handler,
        )
    }

    /// [`Host::register_tool`] with more of the tool's MCP description (`fields`, see
    /// [`ToolSpec::mcp_json`]).
    ///
    /// # Errors
    /// As [`Host::register_tool`].
    pub fn register_tool_with(
        &self,
        name: &str,
        description: &str,
        schema: Value,
        fields: Value,
        handler: impl Handler,
    ) -> Result<(), HostError> {
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema_json: schema.to_string().into(),
            mcp_json: fields.to_string().into(),
        };
        let handler = ToolHandler_TO::from_value(ToolGlue(handler), TD_Opaque);
        host_result(self.0.register_tool(spec, handler))
    }

    /// Unregisters one of this plugin's tools.
    pub fn unregister_tool(&self, name: &str) {
        self.0.unregister_tool(name.into());
    }
}
