//! Prompts, resources and resource templates a plugin registers: served while its generation
//! serves, answered on its threads, replaced by a reload in one step (clients told once per kind),
//! and gone with an unload. The MCP side of each is measured by the official conformance suite
//! (`scripts/conformance/run`); these tests hold the loader's part.

use std::sync::{Arc, Mutex};

use serde_json::json;
use taskhost_abi::McpItemKind;

use crate::fixtures::*;

const STEM: &str = "taskhost_test_conformance";

#[test]
fn a_plugins_items_are_served_while_it_serves_and_leave_with_it() {
    let fx = Fixture::new("items-lifecycle");
    let changed = Arc::new(Mutex::new(Vec::new()));
    {
        let changed = changed.clone();
        fx.host
            .plugins()
            .on_list_changed(move |kind| changed.lock().unwrap().push(kind));
    }
    let path = fx.load(STEM, "conformance_items");
    let plugins = fx.host.plugins();
    let prompts: Vec<String> = plugins
        .items(McpItemKind::Prompt)
        .into_iter()
        .map(|p| p.key)
        .collect();
    assert!(
        prompts.contains(&"test_simple_prompt".to_owned()),
        "{prompts:?}"
    );
    let templated = plugins
        .item_for_uri("test://template/7/data")
        .expect("the template serves the URI");
    assert_eq!(templated.kind, McpItemKind::ResourceTemplate);
    let read = fx
        .rt
        .block_on(plugins.item_request(
            &templated,
            "resources/read",
            &json!({"uri": "test://template/7/data"}),
        ))
        .expect("read");
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Data for ID: 7"),
        "{read}"
    );
    assert!(plugins.item_for_uri("test://nothing").is_none());
    {
        let told = changed.lock().unwrap();
        for kind in [
            McpItemKind::Prompt,
            McpItemKind::Resource,
            McpItemKind::ResourceTemplate,
        ] {
            assert_eq!(
                told.iter().filter(|k| **k == kind).count(),
                1,
                "{kind:?} told once: {told:?}"
            );
        }
    }

    // A rebuild replaces the items in one step; they are served throughout.
    let staged = path.with_extension("new");
    std::fs::write(&staged, rebuilt_bytes(STEM, 7)).unwrap();
    std::fs::rename(&staged, &path).unwrap();
    changed.lock().unwrap().clear();
    plugins.load(&path, None, false).expect("reload");
    assert_eq!(plugins.items(McpItemKind::Prompt).len(), prompts.len());
    assert!(plugins.item_for_uri("test://static-text").is_some());
    assert_eq!(changed.lock().unwrap().len(), 3, "each kind told once");

    plugins.unload(&path);
    for kind in [
        McpItemKind::Prompt,
        McpItemKind::Resource,
        McpItemKind::ResourceTemplate,
    ] {
        assert!(
            plugins.items(kind).is_empty(),
            "{kind:?} left with the plugin"
        );
    }
}
