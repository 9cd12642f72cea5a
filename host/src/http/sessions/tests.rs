//! The sessions' caps, fence and parking, without HTTP.

use super::*;

#[tokio::test]
async fn a_session_rmcp_closes_is_forgotten() {
    let sessions = Sessions::new(2, DEFAULT_PARK_AFTER);
    let (id, _transport) = sessions.create_session().await.expect("a session");
    assert!(sessions.admit(&id, "principal-1").await);
    sessions
        .negotiated(&id)
        .expect("a known session")
        .set_tasks_era();
    assert!(sessions.negotiated(&id).is_some_and(|n| n.tasks_era()));
    sessions.close_session(&id).await.expect("closed");
    assert!(sessions.known.lock().is_empty());
    assert!(sessions.negotiated(&id).is_none());
}

#[tokio::test]
async fn past_the_cap_a_busy_session_stays_and_the_new_one_is_refused() {
    let sessions = Sessions::new(1, DEFAULT_PARK_AFTER);
    let (busy, _a) = sessions.create_session().await.expect("a session");
    assert!(sessions.admit(&busy, "principal-1").await);
    let _open = sessions.enter(&busy, "principal-1").ok().flatten();
    let (new, _b) = sessions.create_session().await.expect("a session");
    assert!(!sessions.admit(&new, "principal-1").await, "none idle");
    assert!(sessions.known.lock().contains_key(&busy));
    assert!(!sessions.known.lock().contains_key(&new));
    assert!(sessions.enter(&busy, "principal-2").is_err(), "fenced");
}

/// A session as rmcp leaves it after its handshake: created, given to `owner`, its
/// `initialize` stored.
async fn initialized(sessions: &Sessions, owner: &str) -> SessionId {
    let (id, _transport) = sessions.create_session().await.expect("a session");
    assert!(sessions.admit(&id, owner).await);
    let init = serde_json::from_value(serde_json::json!({"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}))
    .expect("initialize parameters");
    sessions
        .store(&id, &SessionState::new(init))
        .await
        .expect("stored");
    id
}

#[tokio::test]
async fn an_idle_session_is_parked_and_restored_with_its_principal_and_era() {
    let sessions = Sessions::new(2, DEFAULT_PARK_AFTER);
    let id = initialized(&sessions, "principal-1").await;
    sessions
        .negotiated(&id)
        .expect("a known session")
        .set_tasks_era();
    assert!(
        sessions.load(&id).await.expect("load").is_none(),
        "not parked"
    );
    sessions.park_idle(Duration::ZERO).await;
    assert!(
        !sessions.has_session(&id).await.expect("asked"),
        "its worker let go"
    );
    // rmcp reports the end of the worker let go: it ends no session.
    sessions.close_session(&id).await.expect("closed");
    assert!(sessions.load(&id).await.expect("load").is_some(), "kept");
    assert!(sessions.enter(&id, "principal-2").is_err(), "still fenced");
    let restored = sessions
        .restore_session(id.clone())
        .await
        .expect("restored");
    assert!(matches!(restored, RestoreOutcome::Restored(_)));
    assert!(sessions.has_session(&id).await.expect("asked"));
    assert!(sessions.negotiated(&id).is_some_and(|n| n.tasks_era()));
    assert!(
        sessions
            .enter(&id, "principal-1")
            .is_ok_and(|s| s.is_some())
    );
}

#[tokio::test]
async fn a_busy_session_is_not_parked() {
    let sessions = Sessions::new(2, DEFAULT_PARK_AFTER);
    let id = initialized(&sessions, "principal-1").await;
    let _open = sessions.enter(&id, "principal-1").ok().flatten();
    sessions.park_idle(Duration::ZERO).await;
    assert!(sessions.has_session(&id).await.expect("asked"));
}

#[tokio::test]
async fn a_parked_session_deleted_is_gone_for_good() {
    let sessions = Sessions::new(2, DEFAULT_PARK_AFTER);
    let id = initialized(&sessions, "principal-1").await;
    sessions.park_idle(Duration::ZERO).await;
    sessions.delete(&id).await.expect("deleted");
    assert!(sessions.known.lock().is_empty());
    assert!(sessions.load(&id).await.expect("load").is_none());
    let restored = sessions.restore_session(id).await.expect("answered");
    assert!(matches!(restored, RestoreOutcome::NotSupported));
}

#[tokio::test]
async fn a_session_holding_a_subscription_or_a_log_level_is_never_parked() {
    let sessions = Sessions::new(2, DEFAULT_PARK_AFTER);
    let id = initialized(&sessions, "principal-1").await;
    sessions.pin(&id);
    sessions.park_idle(Duration::ZERO).await;
    assert!(sessions.has_session(&id).await.expect("asked"));
    assert!(
        sessions.load(&id).await.expect("load").is_none(),
        "not parked"
    );
}
