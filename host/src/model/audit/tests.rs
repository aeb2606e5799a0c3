use super::*;

const KEY: &[u8] = &[7; KEY_BYTES];
const OTHER_KEY: &[u8] = &[9; KEY_BYTES];

/// An entry chained to `prev`, keyed with `key` if given.
fn entry(prev: &str, seq: i64, actor: &str, key: Option<&[u8]>) -> AuditEntry {
    let detail = format!("{{\"n\":{seq}}}");
    let hash = entry_hash(prev, seq, 1000 + seq, actor, "job.apply", "job", &detail);
    AuditEntry {
        seq,
        at: 1000 + seq,
        actor: actor.into(),
        action: "job.apply".into(),
        subject: "job".into(),
        detail,
        prev_hash: prev.into(),
        mac: key.map(|k| entry_mac(k, &hash)),
        hash,
    }
}

/// Entries 1..=n, the first `unkeyed` of them without a MAC.
fn chain_with(n: i64, unkeyed: i64, key: &[u8]) -> Vec<AuditEntry> {
    let mut out: Vec<AuditEntry> = Vec::new();
    for seq in 1..=n {
        let prev = out.last().map_or(GENESIS.to_string(), |e| e.hash.clone());
        out.push(entry(&prev, seq, "ops", (seq > unkeyed).then_some(key)));
    }
    out
}

fn chain(n: i64) -> Vec<AuditEntry> {
    chain_with(n, 0, KEY)
}

/// Re-chain `entries` from `from` on (renumbered and rehashed) as someone
/// without the key would: hashes right, MACs copied or absent.
fn rechain(entries: &mut [AuditEntry], keep_macs: bool) {
    for i in 0..entries.len() {
        let prev = if i == 0 {
            GENESIS.to_string()
        } else {
            entries[i - 1].hash.clone()
        };
        let e = &mut entries[i];
        e.seq = i as i64 + 1;
        e.prev_hash = prev;
        e.hash = entry_hash(
            &e.prev_hash,
            e.seq,
            e.at,
            &e.actor,
            &e.action,
            &e.subject,
            &e.detail,
        );
        if !keep_macs {
            e.mac = None;
        }
    }
}

fn anchors(c: &[AuditEntry]) -> Vec<Anchor> {
    c.iter().map(Anchor::of).collect()
}

fn check(c: &[AuditEntry], a: &[Anchor]) -> Result<Verified, ChainBreak> {
    verify(c, MacCheck::Key(KEY), a)
}

#[test]
fn an_untouched_chain_verifies_with_its_key_and_anchors() {
    let c = chain(5);
    let v = check(&c, &anchors(&c[..3])).unwrap();
    assert_eq!(v.entries, 5);
    assert_eq!(v.keyed_from, Some(1));
    assert_eq!(v.anchors_matched, 3);
    assert_eq!(v.anchored_to, Some(3));
    assert_eq!(v.head, Some(Anchor::of(&c[4])));
    assert_eq!(verify_chain(&c), Ok(5));
}

#[test]
fn editing_an_entry_breaks_the_chain_at_that_entry() {
    let mut c = chain(5);
    c[2].actor = "mallory".into();
    assert_eq!(verify_chain(&c), Err(ChainBreak::BadHash { seq: 3 }));
    assert_eq!(check(&c, &[]), Err(ChainBreak::BadHash { seq: 3 }));
}

#[test]
fn an_edit_rehashed_without_the_key_fails_at_the_edited_entry() {
    let mut c = chain(5);
    c[2].detail = "{\"n\":99}".into();
    rechain(&mut c, true);
    assert_eq!(verify_chain(&c), Ok(5), "the hash chain alone is fooled");
    assert_eq!(check(&c, &[]), Err(ChainBreak::BadMac { seq: 3 }));
}

#[test]
fn removing_an_entry_is_detected() {
    let mut c = chain(5);
    c.remove(1);
    assert_eq!(
        check(&c, &[]),
        Err(ChainBreak::Gap {
            seq: 3,
            previous: 1
        })
    );
    let mut c = chain(5);
    c.remove(0);
    assert_eq!(check(&c, &[]), Err(ChainBreak::MissingStart { first: 2 }));
}

#[test]
fn a_deletion_renumbered_without_the_key_fails_at_the_first_renumbered_entry() {
    let mut c = chain(5);
    c.remove(1);
    rechain(&mut c, true);
    assert_eq!(check(&c, &[]), Err(ChainBreak::BadMac { seq: 2 }));
}

#[test]
fn an_appended_entry_without_the_key_is_forged() {
    let mut c = chain(3);
    let prev = c[2].hash.clone();
    c.push(entry(&prev, 4, "mallory", None));
    assert_eq!(
        check(&c, &[]),
        Err(ChainBreak::Unkeyed { seq: 4, keyed: 1 })
    );
    c[3] = entry(&prev, 4, "mallory", Some(OTHER_KEY));
    assert_eq!(check(&c, &[]), Err(ChainBreak::BadMac { seq: 4 }));
}

#[test]
fn a_truncated_tail_is_caught_only_by_an_anchor() {
    let c = chain(5);
    let a = anchors(&c);
    let cut = &c[..3];
    assert!(check(cut, &[]).is_ok(), "MACs cannot see a missing tail");
    assert_eq!(
        check(cut, &a),
        Err(ChainBreak::Truncated {
            first_missing: 4,
            last: 3,
            anchored: 5
        })
    );
    assert_eq!(check(&[], &a).unwrap_err().seq(), 1);
}

#[test]
fn a_chain_rewritten_whole_without_macs_fails_at_its_first_anchor() {
    let mut c = chain(5);
    let a = anchors(&c[1..]);
    c[0].actor = "mallory".into();
    rechain(&mut c, false);
    // Without anchors it would pass as a chain written before keying.
    assert_eq!(check(&c, &[]).unwrap().keyed_from, None);
    assert_eq!(check(&c, &a), Err(ChainBreak::Rewritten { seq: 2 }));
}

#[test]
fn stripping_the_macs_is_caught_by_an_anchor() {
    let mut c = chain(4);
    let a = anchors(&c[..1]);
    for e in &mut c {
        e.mac = None;
    }
    assert_eq!(check(&c, &a), Err(ChainBreak::Rewritten { seq: 1 }));
}

#[test]
fn entries_before_keying_verify_as_the_hash_chain_and_none_may_follow_a_keyed_one() {
    let c = chain_with(5, 2, KEY);
    let v = check(&c, &[]).unwrap();
    assert_eq!(v.keyed_from, Some(3));
    let mut c = c;
    c[4].mac = None;
    assert_eq!(
        check(&c, &[]),
        Err(ChainBreak::Unkeyed { seq: 5, keyed: 3 })
    );
}

#[test]
fn a_keyed_chain_without_its_key_is_refused_by_name() {
    let c = chain(2);
    assert_eq!(
        verify(&c, MacCheck::NoKey, &[]),
        Err(ChainBreak::NoKey { seq: 1 })
    );
    assert_eq!(
        verify(&c, MacCheck::Key(OTHER_KEY), &[]),
        Err(ChainBreak::BadMac { seq: 1 })
    );
}

#[test]
fn verifying_from_an_anchor_checks_the_tail_it_would_vouch_for() {
    let c = chain(6);
    let a = Anchor::of(&c[2]);
    let v = verify_from(&a, &c[2..], MacCheck::Key(KEY)).unwrap();
    assert_eq!(v.head, Some(Anchor::of(&c[5])));
    let mut tail = c[2..].to_vec();
    tail[2].actor = "mallory".into();
    assert_eq!(
        verify_from(&a, &tail, MacCheck::Key(KEY)),
        Err(ChainBreak::BadHash { seq: 5 })
    );
    let mut moved = c[2..].to_vec();
    moved[0].mac = None;
    assert_eq!(
        verify_from(&a, &moved, MacCheck::Key(KEY)),
        Err(ChainBreak::Rewritten { seq: 3 })
    );
    assert!(verify_from(&a, &[], MacCheck::Key(KEY)).is_err());
}

#[test]
fn anchors_round_trip_through_their_lines_and_a_bad_line_is_named() {
    let c = chain(2);
    let text = format!(
        "{}\n\n{}\n",
        Anchor::of(&c[0]).line(),
        Anchor::of(&c[1]).line()
    );
    assert_eq!(Anchor::parse_all(&text), Ok(anchors(&c)));
    let err = Anchor::parse_all("{\"seq\":1}\nnot json").unwrap_err();
    assert!(err.starts_with("line 1 is not an anchor"), "{err}");
}

#[test]
fn a_key_is_32_bytes_of_hex_and_the_error_never_shows_it() {
    assert_eq!(
        parse_key(&format!(" {}\n", "ab".repeat(32))).unwrap().len(),
        32
    );
    assert_eq!(parse_key("zz-secret").unwrap_err(), "is not hexadecimal");
    let short = parse_key("abcd").unwrap_err();
    assert!(
        short.contains("holds 2 bytes") && !short.contains("abcd"),
        "{short}"
    );
}

#[test]
fn the_mac_is_hmac_sha256_of_the_hash() {
    // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    assert_eq!(
        entry_mac(b"Jefe", "what do ya want for nothing?"),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn an_export_line_is_one_json_object_with_the_detail_as_json() {
    let c = chain(1);
    let line = export_line(&c[0]);
    assert!(!line.contains('\n'));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["seq"], 1);
    assert_eq!(v["detail"]["n"], 1);
    assert_eq!(v["time"], "1970-01-01T00:00:01.001Z");
    assert_eq!(v["mac"], serde_json::json!(c[0].mac));
}
