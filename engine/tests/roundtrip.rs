//! Property: any dataset, encoded for any target and decoded again, is the same dataset
//! (less what the target cannot hold, which must be reported as a loss).

use ferrokv::format::rdb::{
    dump_payload, read_dump_payload, Encoder, Family, RdbReader, RdbWriter, Record, StreamId, StreamMeta, Target,
};
use ferrokv::logical::{Entry, Field, Logical, StreamValue};
use proptest::prelude::*;

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Integers (exercise int encodings), short text, long compressible text, binary.
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        (-200i64..200).prop_map(|i| i.to_string().into_bytes()),
        "[a-z0-9:]{0,12}".prop_map(String::into_bytes),
        ("[ab]{1,3}", 20usize..200).prop_map(|(s, n)| s.repeat(n).into_bytes()),
        prop::collection::vec(any::<u8>(), 0..80),
    ]
}

fn unique_sorted(v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v = v;
    v.sort();
    v.dedup();
    v
}

fn value() -> impl Strategy<Value = Logical> {
    let score = prop_oneof![
        any::<i32>().prop_map(f64::from),
        -1e300f64..1e300,
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.1)
    ];
    prop_oneof![
        bytes().prop_map(Logical::String),
        prop::collection::vec(bytes(), 1..300).prop_map(Logical::List),
        prop::collection::vec(bytes(), 1..200).prop_map(|v| Logical::Set(unique_sorted(v))),
        prop::collection::vec((bytes(), score), 1..200).prop_map(|v| {
            let mut seen = std::collections::BTreeMap::new();
            for (m, s) in v {
                seen.insert(m, s);
            }
            let mut z: Vec<(Vec<u8>, f64)> = seen.into_iter().collect();
            z.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            Logical::Zset(z)
        }),
        prop::collection::vec((bytes(), bytes(), prop::option::of(1_700_000_000_000i64..1_900_000_000_000)), 1..700)
            .prop_map(|v| {
                let mut seen = std::collections::BTreeMap::new();
                for (f, val, t) in v {
                    seen.insert(f, (val, t));
                }
                Logical::Hash(
                    seen.into_iter().map(|(field, (value, expire_ms))| Field { field, value, expire_ms }).collect(),
                )
            }),
        prop::collection::vec(prop::collection::vec((bytes(), bytes()), 1..4), 1..300).prop_map(|entries| {
            let entries: Vec<Entry> = entries
                .into_iter()
                .enumerate()
                .map(|(i, f)| (StreamId { ms: 1_700_000_000_000 + (i as u64 / 3), seq: i as u64 % 3 }, f))
                .collect();
            let last = entries.last().map(|e| e.0).unwrap_or_default();
            Logical::Stream(Box::new(StreamValue {
                meta: StreamMeta {
                    length: entries.len() as u64,
                    last_id: last,
                    first_id: entries.first().map(|e| e.0),
                    max_deleted_id: Some(StreamId::default()),
                    entries_added: Some(entries.len() as u64),
                    groups: vec![],
                    idmp: None,
                },
                entries,
            }))
        }),
    ]
}

/// What `target` keeps of `v`.
fn expected(v: &Logical, target: Target) -> Logical {
    match (v, target) {
        (Logical::Hash(f), Target::Redis62 | Target::Redis70 | Target::Redis72) => {
            Logical::Hash(f.iter().map(|f| Field { expire_ms: None, ..f.clone() }).collect())
        }
        _ => v.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn encode_decode_every_target(keys in prop::collection::vec((bytes(), value(), prop::option::of(1_800_000_000_000i64..1_900_000_000_000)), 1..12)) {
        for target in Target::ALL {
            let mut w = RdbWriter::new(Vec::new(), target, 1_700_000_000).unwrap();
            w.select_db(0, None).unwrap();
            let mut losses = Vec::new();
            let mut seen = std::collections::BTreeMap::new();
            for (k, v, e) in &keys {
                seen.insert(k.clone(), (v.clone(), *e));
            }
            for (k, (v, e)) in &seen {
                w.key(k, *e, None, None, v, &mut losses).unwrap();
            }
            let file = w.finish().unwrap();
            let mut back = std::collections::BTreeMap::new();
            for rec in RdbReader::new(&file).unwrap() {
                if let Record::Key(k) = rec.unwrap() {
                    back.insert(k.key.to_bytes().into_owned(), (Logical::from_record(&k).unwrap(), k.expire_ms));
                }
            }
            prop_assert_eq!(back.len(), seen.len());
            for (k, (v, e)) in &seen {
                let (got, ge) = &back[k];
                prop_assert_eq!(got, &expected(v, target), "target {}", target);
                prop_assert_eq!(ge, e);
            }
            // Field TTLs below 7.4 (Valkey aside) are the only losses.
            let ttl_keys = seen.values().filter(|(v, _)| matches!(v, Logical::Hash(f) if f.iter().any(|f| f.expire_ms.is_some()))).count();
            match target {
                Target::Redis70 | Target::Redis72 => prop_assert_eq!(losses.len(), ttl_keys),
                Target::Redis74 | Target::Valkey9 => prop_assert!(losses.is_empty()),
                Target::Redis62 => prop_assert!(losses.len() >= ttl_keys),
            }
        }
    }

    #[test]
    fn dump_payloads_round_trip(v in value()) {
        for target in Target::ALL {
            let enc = Encoder::new(target);
            let mut losses = Vec::new();
            let payload = dump_payload(&enc, &v, &mut losses);
            let family = if target == Target::Valkey9 { Family::Valkey } else { Family::Redis };
            let back = read_dump_payload(&payload, family).unwrap();
            prop_assert_eq!(Logical::from_value(&back).unwrap(), expected(&v, target));
            // A flipped byte anywhere is caught (CRC), never a panic.
            let mut bad = payload.clone();
            let i = payload.len() / 2;
            bad[i] ^= 0x10;
            prop_assert!(read_dump_payload(&bad, family).is_err());
        }
    }
}
