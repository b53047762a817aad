//! An unchecked mirror of `BitTcf`'s serialized fields, to tamper with a layout through serde
//! (bincode) and check that decoding validates.

/// `BitTcf`'s fields in serialization order, without its checks.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Mirror {
    pub rows: usize,
    pub cols: usize,
    pub row_window_offset: Vec<u32>,
    pub sparse_a_to_b: Vec<u32>,
    pub tc_local_bit: Vec<u64>,
    pub block_value_offset: Vec<u32>,
    pub values: Vec<f32>,
}
