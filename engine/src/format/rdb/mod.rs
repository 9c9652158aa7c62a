//! RDB: the snapshot format (Redis RDB 1-13, Valkey 80), decoded as a stream of records.

mod encode;
mod incremental;
mod module;
mod prim;
mod reader;
mod stream;
mod types;
mod value;

pub use encode::{
    dump_payload, dump_payload_with, function_payload, put_function, put_key, put_key_with, put_len, put_select_db,
    put_str, read_dump_payload, read_dump_payload_with, read_function_payload, score_text, score_text_into, Encoder,
    Form, FunctionPayloadError, KeyParts, Limits, Loss, RdbWriter, Target,
};
pub use incremental::{differs_from_whole, IncrementalError, IncrementalReader};
pub use module::{module_name, KeyMetaClass, ModuleAux, ModuleValue};
pub use prim::{parse_double, RStr};
pub use reader::{
    aux_int, escape_key, head_aux, head_aux_int, repl_stream_db, Checksum, KeyRecord, RdbError, RdbReader, ReadOptions,
    Record, CRC_STEP,
};
pub use stream::{
    Consumer, Group, Idmp, IdmpProducer, PendingEntry, Stream, StreamEntries, StreamEntry, StreamId, StreamMeta,
};
pub use types::{Dialect, Family, LogicalType, Opcode, ValueType, REDIS_MAX_VERSION};
pub use value::{HashEntry, HashIter, ListIter, PackedItem, QuickNodes, Score, SetIter, Value, ZsetIter};
