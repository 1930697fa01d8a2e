//! Unit tests of caller-bound ids: hand-made principals, keys written to files.

use super::*;
use crate::backend::affinity::minted_shape;
use crate::proto::{GetTaskRequest, Message, SendMessageRequest, Task};
use crate::protocol::ops::Op;

const OLD: &str = "the old owner key, 32 bytes long";
const NEW: &str = "the new owner key, 32 bytes long";

/// Keys loaded from a file holding `text`.
fn keys(text: &str) -> Arc<OwnerKeys> {
    Arc::new(load(text).unwrap())
}

fn load(text: &str) -> Result<OwnerKeys, String> {
    let path = std::env::temp_dir().join(format!(
        "a2a-owner-keys-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, text).unwrap();
    let loaded = OwnerKeys::load(&path, "route-a");
    std::fs::remove_file(&path).unwrap();
    loaded
}

fn principal(scheme: Scheme, name: &str) -> Principal {
    Principal {
        name: name.into(),
        scheme,
        claims: None,
    }
}

fn get(id: &str) -> Request {
    Request::Unary(UnaryRequest::GetTask(GetTaskRequest {
        id: id.into(),
        ..Default::default()
    }))
}

fn got(request: &Request) -> &str {
    match request {
        Request::Unary(UnaryRequest::GetTask(get)) => &get.id,
        _ => unreachable!(),
    }
}

/// `id` sealed for `caller`, as a reply would carry it.
fn sealed(caller: &Caller, id: &str) -> String {
    let mut task = Task {
        id: id.into(),
        ..Default::default()
    };
    caller.seal_out(&mut task);
    task.id
}

#[test]
fn an_id_opens_for_its_owner_only() {
    let keys = keys(OLD);
    let alice = principal(Scheme::ApiKey, "alice");
    let owner = keys.caller(Some(&alice));
    let id = sealed(&owner, "task-1");
    assert_eq!(id.len(), WRAP_LEN + "task-1".len());
    assert!(!id.contains("alice"), "the name is not in the id");
    let mut request = get(&id);
    owner.restore_in(&mut request).unwrap();
    assert_eq!(got(&request), "task-1");
    // Another name, the same name under another scheme, anonymous, no authentication.
    let issued = |iss: &str| Principal {
        claims: Some(Arc::new(
            serde_json::json!({"iss": iss, "sub": "alice"})
                .as_object()
                .unwrap()
                .clone(),
        )),
        ..principal(Scheme::Jwt, "alice")
    };
    let (one, other_issuer) = (issued("https://a.example"), issued("https://b.example"));
    let id_of_one = sealed(&keys.caller(Some(&one)), "task-2");
    let mut request = get(&id_of_one);
    let err = keys.caller(Some(&other_issuer)).restore_in(&mut request);
    assert_eq!(
        err.unwrap_err().kind,
        ErrorKind::TaskNotFound,
        "another issuer's alice"
    );
    let mut request = get(&id_of_one);
    keys.caller(Some(&issued("https://a.example")))
        .restore_in(&mut request)
        .unwrap();
    let others = [
        Some(principal(Scheme::ApiKey, "bob")),
        Some(principal(Scheme::Jwt, "alice")),
        Some(principal(Scheme::Anonymous, "")),
        None,
    ];
    for other in &others {
        let mut request = get(&id);
        let err = keys.caller(other.as_ref()).restore_in(&mut request);
        assert_eq!(err.unwrap_err().kind, ErrorKind::TaskNotFound, "{other:?}");
        assert_eq!(got(&request), id, "left as sent");
    }
    // No authentication and the anonymous principal are one owner.
    let anonymous = sealed(&keys.caller(None), "t");
    let mut request = get(&anonymous);
    let as_anonymous = keys.caller(Some(&principal(Scheme::Anonymous, "")));
    as_anonymous.restore_in(&mut request).unwrap();
}

#[test]
fn made_up_and_altered_ids_are_unknown_tasks() {
    let keys = keys(OLD);
    let owner = keys.caller(Some(&principal(Scheme::ApiKey, "alice")));
    let id = sealed(&owner, "task-1");
    for at in 0..id.len() {
        let mut bytes = id.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        assert!(owner.restore_in(&mut get(&altered)).is_err(), "{altered}");
    }
    let other_route = Arc::new(OwnerKeys {
        codecs: vec![IdCodec::owner(OLD.as_bytes(), "route-b").unwrap()],
    });
    let stranger = other_route.caller(Some(&principal(Scheme::ApiKey, "alice")));
    assert!(stranger.restore_in(&mut get(&id)).is_err(), "another route");
    // The affinity codec of the same secret and route does not make owner ids.
    let affinity = IdCodec::new(OLD.as_bytes(), "route-a").unwrap();
    let endpoint = affinity.wrap(affinity.tag("10.0.0.1:1"), "task-1");
    assert!(owner.restore_in(&mut get(&endpoint)).is_err());
    for plain in ["task-1", "", &id[..WRAP_LEN]] {
        let err = owner.restore_in(&mut get(plain)).err();
        // An empty id is unset: nothing to check, the agent answers it.
        assert_eq!(err.is_none(), plain.is_empty(), "{plain:?}");
    }
    // The reference SDK's answers to unknown ids, but for the id.
    let refusal = unknown_task(&get("x")).to_json();
    let data = r#"[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"TASK_NOT_FOUND"}]"#;
    assert_eq!(refusal["code"], -32001);
    assert_eq!(refusal["message"], "Task not found");
    assert_eq!(refusal["data"].to_string(), data);
    let mut follow_up = send(&id, &sealed(&owner, "ctx"));
    let err = keys.caller(None).restore_in(&mut follow_up).unwrap_err();
    assert_eq!(err.message, format!("Task {id} not found"));
    // One foreign id among the caller's own: refused, and nothing opened.
    let mut mixed = send(&id, "not-sealed");
    let err = owner.restore_in(&mut mixed).unwrap_err();
    assert_eq!(err.message, format!("Task {id} not found"));
    assert_eq!(context(&mixed), "not-sealed");
}

#[test]
fn a_new_key_first_keeps_old_ids_working() {
    let alice = principal(Scheme::Jwt, "alice");
    let before = keys(OLD).caller(Some(&alice));
    let old_id = sealed(&before, "task-1");
    let rotated = keys(&format!("{NEW}\n{OLD}\n"));
    let after = rotated.caller(Some(&alice));
    let mut request = get(&old_id);
    after.restore_in(&mut request).unwrap();
    assert_eq!(got(&request), "task-1");
    // New ids are sealed with the new key: the old key alone no longer opens them.
    let new_id = sealed(&after, "task-1");
    assert_ne!(new_id, old_id);
    assert!(before.restore_in(&mut get(&new_id)).is_err());
    let bob = rotated.caller(Some(&principal(Scheme::Jwt, "bob")));
    assert!(bob.restore_in(&mut get(&old_id)).is_err());
}

fn send(task_id: &str, context_id: &str) -> Request {
    Request::Unary(UnaryRequest::SendMessage(SendMessageRequest {
        message: Some(Message {
            message_id: "m".into(),
            task_id: task_id.into(),
            context_id: context_id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }))
}

fn context(request: &Request) -> &str {
    match request {
        Request::Unary(UnaryRequest::SendMessage(send)) => {
            &send.message.as_ref().unwrap().context_id
        }
        _ => unreachable!(),
    }
}

#[test]
fn a_new_conversation_gets_a_context_of_its_owner() {
    let keys = keys(OLD);
    let alice = keys.caller(Some(&principal(Scheme::ApiKey, "alice")));
    let bob = keys.caller(Some(&principal(Scheme::ApiKey, "bob")));
    let mut fresh = send("", "");
    alice.restore_in(&mut fresh).unwrap();
    let minted = context(&fresh).to_owned();
    assert!(minted_shape(&minted), "{minted}");
    assert!(alice.owns_context(&minted));
    assert!(!bob.owns_context(&minted));
    let mut again = send("", "");
    alice.restore_in(&mut again).unwrap();
    assert_ne!(context(&again), minted, "random");
    // A follow-up names its task or context: nothing is minted.
    let task = sealed(&alice, "task-1");
    let mut follow_up = send(&task, "");
    alice.restore_in(&mut follow_up).unwrap();
    assert_eq!(context(&follow_up), "");
    // The affinity id around a minted context (its tail) is the caller's too.
    let affinity = IdCodec::new(NEW.as_bytes(), "route-a").unwrap();
    let wrapped = affinity.wrap(affinity.tag("10.0.0.1:1"), &minted);
    assert!(alice.owns_context(&wrapped));
    assert!(!minted_shape(&wrapped));
    for not_minted in ["", "ctx-1", &minted[1..], &format!("ü{}", &minted[2..])] {
        assert!(!alice.owns_context(not_minted), "{not_minted}");
    }
}

#[test]
fn a_listing_keeps_the_callers_tasks() {
    let keys = keys(OLD);
    let alice = keys.caller(Some(&principal(Scheme::ApiKey, "alice")));
    let bob = keys.caller(Some(&principal(Scheme::ApiKey, "bob")));
    let mint = |caller: &Caller| {
        let mut request = send("", "");
        caller.restore_in(&mut request).unwrap();
        context(&request).to_owned()
    };
    let task = |id: &str, context_id: String| Task {
        id: id.into(),
        context_id,
        ..Default::default()
    };
    let mut list = ListTasksResponse {
        tasks: vec![
            task("a1", mint(&alice)),
            task("b1", mint(&bob)),
            task("agent-made", "ctx-1".into()),
            task("a2", mint(&alice)),
        ],
        next_page_token: "agent-page-2".into(),
        page_size: 4,
        total_size: 40,
    };
    alice.keep_own(&mut list);
    alice.seal_out(&mut list);
    let ids: Vec<_> = list.tasks.iter().map(|t| &t.id[WRAP_LEN..]).collect();
    assert_eq!(ids, ["a1", "a2"]);
    assert_eq!(list.next_page_token, "agent-page-2");
    // Sealed out: the caller can name them again.
    let mut request = get(&list.tasks[0].id);
    alice.restore_in(&mut request).unwrap();
    assert_eq!(got(&request), "a1");
}

#[test]
fn every_operation_round_trips() {
    let keys = keys(OLD);
    let alice = keys.caller(Some(&principal(Scheme::Mtls, "spiffe://a")));
    for &op in Op::ALL {
        let mut request = Request::decode(op, None).unwrap();
        let original = send("task-9", "ctx-9");
        let Request::Unary(UnaryRequest::SendMessage(sample)) = original else {
            unreachable!()
        };
        match &mut request {
            Request::Unary(UnaryRequest::SendMessage(send))
            | Request::Stream(StreamRequest::SendStreamingMessage(send)) => *send = sample,
            Request::Unary(UnaryRequest::GetTask(GetTaskRequest { id, .. })) => *id = "t".into(),
            _ => {}
        }
        let before = request.clone();
        match &mut request {
            Request::Unary(r) => alice.seal_out(r),
            Request::Stream(r) => alice.seal_out(r),
        }
        alice.restore_in(&mut request).unwrap();
        assert_eq!(request, before, "{}", op.name());
    }
}

#[test]
fn key_files_are_checked() {
    assert_eq!(
        load(&format!("\n{OLD}\r\n\n{NEW}")).unwrap().codecs.len(),
        2
    );
    let err = load(&format!("{OLD}\nshort\n")).unwrap_err();
    assert!(
        err.contains("line 2") && err.contains("16 to 1024"),
        "{err}"
    );
    assert!(!err.contains("short"), "a key is never echoed: {err}");
    assert!(load("\n \n").unwrap_err().contains("no key"));
    let eight = format!("{OLD}\n").repeat(MAX_KEYS);
    assert_eq!(load(&eight).unwrap().codecs.len(), MAX_KEYS);
    let nine = format!("{OLD}\n").repeat(MAX_KEYS + 1);
    assert!(load(&nine).unwrap_err().contains("more than 8 keys"));
    let huge = "k".repeat(MAX_KEYS * (MAX_KEY_LEN + KEY_FILE_SLACK) + 1);
    assert!(load(&huge).unwrap_err().contains("more than"));
    let missing = OwnerKeys::load(Path::new("/nonexistent/owner-key"), "r");
    assert!(missing.is_err());
    assert_eq!(format!("{:?}", keys(OLD)), "OwnerKeys(1 keys)");
}
