use rmcp::model::{
    CustomResult, InitializeResult, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0,
    NumberOrString, ProtocolVersion, ServerCapabilities, ServerJsonRpcMessage, ServerResult,
};
use serde_json::json;

use super::{Negotiated, initialized};

fn answer(version: ProtocolVersion) -> InitializeResult {
    InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
        .with_protocol_version(version)
}

#[test]
fn an_initialize_that_chose_2025_11_25_gains_the_tasks_capability_and_turns_its_era_on() {
    let negotiated = Negotiated::default();
    let rmcp_made = serde_json::to_value(answer(ProtocolVersion::V_2025_11_25)).unwrap();
    let amended = initialized(&negotiated, &answer(ProtocolVersion::V_2025_11_25)).unwrap();
    assert_eq!(
        amended["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let mut rest = amended.clone();
    rest["capabilities"]
        .as_object_mut()
        .unwrap()
        .remove("tasks");
    assert_eq!(rest, rmcp_made, "nothing else changes");
    assert!(negotiated.tasks_era());
}

#[test]
fn an_initialize_of_another_version_is_left_as_rmcp_made_it() {
    let negotiated = Negotiated::default();
    for version in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2026_07_28] {
        assert_eq!(initialized(&negotiated, &answer(version)), None);
    }
    assert!(!negotiated.tasks_era());
}

#[test]
fn an_amended_answer_is_written_as_its_result_alone() {
    let result = json!({"tools": [{"name": "bash", "execution": {"taskSupport": "optional"}}]});
    let message: ServerJsonRpcMessage = JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id: NumberOrString::Number(3),
        result: ServerResult::CustomResult(CustomResult(result.clone())),
    });
    assert_eq!(
        serde_json::to_value(&message).unwrap(),
        json!({"jsonrpc": "2.0", "id": 3, "result": result})
    );
}
