//! The session's initial weights (the safetensors file `golow-worker init-weights` writes) read into the plan's
//! layout without a framework: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
//! shape and byte range, then the bytes. The file is checked whole before anything is used, so a damaged or foreign
//! file is one line of error, never a panic or a half-loaded model.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::plan::Plan;

/// Larger headers are not weights files (ResNet-50's is about 30 KB).
const MAX_HEADER_BYTES: u64 = 16 << 20;

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// Host copies of every tensor, in the plan's two buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub trainable: Vec<f32>,
    pub statistics: Vec<f32>,
}

pub fn load(path: &Path, plan: &Plan) -> Result<Weights, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read weights {}: {e}", path.display()))?;
    parse(&bytes, plan).map_err(|e| format!("weights {}: {e}", path.display()))
}

pub fn parse(bytes: &[u8], plan: &Plan) -> Result<Weights, String> {
    let Some((length, rest)) = bytes.split_first_chunk::<8>() else {
        return Err("shorter than a safetensors header".into());
    };
    let length = u64::from_le_bytes(*length);
    if length > MAX_HEADER_BYTES || length > rest.len() as u64 {
        return Err(format!(
            "its header claims {length} bytes, the file has {} after the length",
            rest.len()
        ));
    }
    let (header, data) = rest.split_at(length as usize);
    let mut entries: HashMap<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| format!("not a safetensors header: {e}"))?;
    entries.remove("__metadata__");
    // Every tensor is checked before memory for the model is taken, so a bad file costs nothing.
    let mut ranges = Vec::with_capacity(plan.params.len());
    for param in &plan.params {
        let raw = entries.remove(&param.name).ok_or_else(|| {
            format!(
                "no tensor {} (is it a weights file of this model?)",
                param.name
            )
        })?;
        let entry: Entry =
            serde_json::from_value(raw).map_err(|e| format!("tensor {}: {e}", param.name))?;
        if entry.dtype != "F32" {
            return Err(format!(
                "tensor {} is {}, golow's weights are F32",
                param.name, entry.dtype
            ));
        }
        if entry.shape != param.shape {
            return Err(format!(
                "tensor {} has shape {:?}, this model needs {:?}",
                param.name, entry.shape, param.shape
            ));
        }
        let [begin, end] = entry.data_offsets;
        let wanted = param.elements() * 4;
        if begin > end || end > data.len() || end - begin != wanted {
            return Err(format!(
                "tensor {} claims bytes {begin}..{end} of {}, it needs {wanted}",
                param.name,
                data.len()
            ));
        }
        ranges.push((param, begin..end));
    }
    let mut weights = Weights {
        trainable: vec![0.0; plan.trainable_elements],
        statistics: vec![0.0; plan.statistics_elements],
    };
    for (param, range) in ranges {
        let target = if param.trainable {
            &mut weights.trainable
        } else {
            &mut weights.statistics
        };
        let slot = &mut target[param.offset..param.offset + param.elements()];
        for (value, chunk) in slot.iter_mut().zip(data[range].chunks_exact(4)) {
            *value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
    }
    Ok(weights)
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::config::Model;

    /// A safetensors file of every tensor in `plan`, each filled with `value(name)`.
    fn file(plan: &Plan, value: impl Fn(&str) -> f32) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for p in &plan.params {
            let begin = data.len();
            for _ in 0..p.elements() {
                data.extend_from_slice(&value(&p.name).to_le_bytes());
            }
            header.insert(
                p.name.clone(),
                serde_json::json!({"dtype": "F32", "shape": p.shape, "data_offsets": [begin, data.len()]}),
            );
        }
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let header = serde_json::to_vec(&header).unwrap();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header);
        bytes.extend(data);
        bytes
    }

    fn plan() -> Plan {
        Plan::new(Model::Resnet18, 1, 4, 2, 28).unwrap()
    }

    #[test]
    fn every_tensor_lands_at_its_offset() {
        let plan = plan();
        let bytes = file(&plan, |name| {
            if name.ends_with("running_var") {
                1.0
            } else {
                0.5
            }
        });
        let w = parse(&bytes, &plan).unwrap();
        assert!(w.trainable.iter().all(|&v| v == 0.5));
        let var = plan
            .params
            .iter()
            .find(|p| p.name == "bn1.running_var")
            .unwrap();
        assert_eq!(w.statistics[var.offset..var.offset + 64], [1.0; 64]);
    }

    #[test]
    fn a_file_for_another_model_names_what_does_not_fit() {
        let other = Plan::new(Model::Resnet18, 3, 4, 2, 28).unwrap();
        let why = parse(&file(&other, |_| 0.0), &plan()).unwrap_err();
        assert!(
            why.contains("conv1.weight") && why.contains("[64, 3, 7, 7]"),
            "{why}"
        );
        let resnet50 = Plan::new(Model::Resnet50, 1, 4, 2, 28).unwrap();
        let why = parse(&file(&plan(), |_| 0.0), &resnet50).unwrap_err();
        assert!(why.contains("no tensor") || why.contains("shape"), "{why}");
    }

    #[test]
    fn any_truncation_or_damage_is_an_error_not_a_panic() {
        let plan = plan();
        let bytes = file(&plan, |_| 1.0);
        let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let cuts = (0..header_end + 64).chain((header_end..bytes.len()).step_by(bytes.len() / 50));
        for cut in cuts {
            assert!(parse(&bytes[..cut], &plan).is_err(), "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&huge, &plan).unwrap_err().contains("header claims"));
        let mut garbled = bytes.clone();
        garbled[8] = b'[';
        assert!(parse(&garbled, &plan).is_err());
    }
}
