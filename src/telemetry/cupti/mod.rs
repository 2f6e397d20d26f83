//! CUPTI: what runs on the GPU, kernel by kernel and copy by copy. The collector that loads into
//! worker processes is the next step; this holds its aggregation, which runs anywhere.

pub mod aggregate;
