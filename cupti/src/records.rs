//! Reading CUPTI activity records. CUPTI hands out the newest version of each record its release knows
//! (`CUpti_ActivityKernel10`, `CUpti_ActivityMemcpy5`, `CUpti_ActivityMemset4` for CUDA 13); each version only appends fields, so the
//! collector reads the leading fields that every version since CUDA 11 shares, and never the whole struct.

use std::ffi::{CStr, c_char};

use crate::aggregate::{Aggregator, CopyActivity, KernelActivity};
use crate::api::{Api, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET};
use golow_protocol::collector::{CopyKind, MemoryKind};

/// The leading fields of `CUpti_ActivityKernel4` and every later version.
#[repr(C)]
struct KernelPrefix {
    _kind: u32,
    _cache_and_shared_memory_config: [u8; 2],
    registers_per_thread: u16,
    _partitioned_global_cache: [u32; 2],
    start: u64,
    end: u64,
    _completed: u64,
    device_id: u32,
    _context_id: u32,
    stream_id: u32,
    grid: [i32; 3],
    block: [i32; 3],
    static_shared_memory: i32,
    dynamic_shared_memory: i32,
    _local_memory_and_correlation_id: [u32; 3],
    _grid_id: i64,
    name: *const c_char,
}

/// The leading fields of `CUpti_ActivityMemcpy` and every later version.
#[repr(C)]
struct CopyPrefix {
    _kind: u32,
    copy_kind: u8,
    src_kind: u8,
    dst_kind: u8,
    _flags: u8,
    bytes: u64,
    start: u64,
    end: u64,
    device_id: u32,
    _context_id: u32,
    stream_id: u32,
}

/// The leading fields of `CUpti_ActivityMemset` and every later version.
#[repr(C)]
struct MemsetPrefix {
    _kind: u32,
    _value: u32,
    bytes: u64,
    start: u64,
    end: u64,
    device_id: u32,
    _context_id: u32,
    stream_id: u32,
    _correlation_id: u32,
    _flags: u16,
    memory_kind: u16,
}

pub enum Activity {
    Kernel(KernelActivity),
    Copy(CopyActivity),
}

/// Decodes one record; `None` for kinds the collector does not enable.
///
/// # Safety
/// `record` must point at a record CUPTI returned from `cuptiActivityGetNextRecord`, still inside its buffer.
pub unsafe fn decode(record: *const u8) -> Option<Activity> {
    // SAFETY: every record starts with its u32 kind.
    let kind = unsafe { record.cast::<u32>().read_unaligned() };
    match kind {
        KIND_CONCURRENT_KERNEL => {
            // SAFETY: a kernel record is at least as long as the prefix every version shares.
            let k = unsafe { record.cast::<KernelPrefix>().read_unaligned() };
            let name = if k.name.is_null() {
                String::from("(unnamed kernel)")
            } else {
                // SAFETY: CUPTI's name string lives at least as long as the buffer.
                let name = unsafe { CStr::from_ptr(k.name) };
                // Kernel names are ASCII: checking them whole is several times faster than the lossy walk.
                match name.to_str() {
                    Ok(text) => text.to_owned(),
                    Err(_) => name.to_string_lossy().into_owned(),
                }
            };
            let dim = |d: [i32; 3]| d.map(|v| u32::try_from(v).unwrap_or(0));
            Some(Activity::Kernel(KernelActivity {
                name,
                start_ns: k.start,
                end_ns: k.end,
                grid: dim(k.grid),
                block: dim(k.block),
                registers_per_thread: k.registers_per_thread,
                static_shared_bytes: u32::try_from(k.static_shared_memory).unwrap_or(0),
                dynamic_shared_bytes: u32::try_from(k.dynamic_shared_memory).unwrap_or(0),
                stream: k.stream_id,
                device: k.device_id,
            }))
        }
        KIND_MEMCPY => {
            // SAFETY: a memcpy record is at least as long as the prefix every version shares.
            let c = unsafe { record.cast::<CopyPrefix>().read_unaligned() };
            Some(Activity::Copy(CopyActivity {
                kind: copy_kind(c.copy_kind),
                src: memory_kind(c.src_kind),
                dst: memory_kind(c.dst_kind),
                bytes: c.bytes,
                start_ns: c.start,
                end_ns: c.end,
                stream: c.stream_id,
                device: c.device_id,
            }))
        }
        KIND_MEMSET => {
            // SAFETY: a memset record is at least as long as the prefix every version shares.
            let m = unsafe { record.cast::<MemsetPrefix>().read_unaligned() };
            let memory = memory_kind(u8::try_from(m.memory_kind).unwrap_or(u8::MAX));
            Some(Activity::Copy(CopyActivity {
                kind: CopyKind::Memset,
                src: memory,
                dst: memory,
                bytes: m.bytes,
                start_ns: m.start,
                end_ns: m.end,
                stream: m.stream_id,
                device: m.device_id,
            }))
        }
        _ => None,
    }
}

/// Reads every record of a buffer CUPTI completed into `aggregator`: the collector's work per record.
///
/// # Safety
/// `buffer` must hold `valid` bytes of activity records as CUPTI lays them out, and stay unchanged meanwhile.
pub unsafe fn fold(api: &Api, aggregator: &mut Aggregator, buffer: *mut u8, valid: usize) {
    // SAFETY: the caller vouches for the buffer; CUPTI hands out records inside it.
    unsafe {
        api.for_each_record(buffer, valid, |record| match decode(record) {
            Some(Activity::Kernel(k)) => aggregator.kernel(k),
            Some(Activity::Copy(copy)) => aggregator.copy(copy),
            None => {}
        });
    }
}

/// `CUpti_ActivityMemcpyKind`.
fn copy_kind(raw: u8) -> CopyKind {
    match raw {
        1 => CopyKind::HostToDevice,
        2 => CopyKind::DeviceToHost,
        8 => CopyKind::DeviceToDevice,
        _ => CopyKind::Other,
    }
}

/// `CUpti_ActivityMemoryKind`.
fn memory_kind(raw: u8) -> MemoryKind {
    match raw {
        1 => MemoryKind::Pageable,
        2 => MemoryKind::Pinned,
        3 | 6 => MemoryKind::Device,
        _ => MemoryKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{MaybeUninit, offset_of};
    use std::ptr::addr_of_mut;

    use cudarc::cupti::sys::{
        CUpti_ActivityKernel10, CUpti_ActivityKind, CUpti_ActivityMemcpy5, CUpti_ActivityMemset4,
    };

    use super::*;

    #[test]
    fn prefixes_match_cuda_13_s_own_layouts() {
        assert_eq!(
            offset_of!(KernelPrefix, start),
            offset_of!(CUpti_ActivityKernel10, start)
        );
        assert_eq!(
            offset_of!(KernelPrefix, stream_id),
            offset_of!(CUpti_ActivityKernel10, streamId)
        );
        assert_eq!(
            offset_of!(KernelPrefix, grid),
            offset_of!(CUpti_ActivityKernel10, gridX)
        );
        assert_eq!(
            offset_of!(KernelPrefix, block),
            offset_of!(CUpti_ActivityKernel10, blockX)
        );
        assert_eq!(
            offset_of!(KernelPrefix, dynamic_shared_memory),
            offset_of!(CUpti_ActivityKernel10, dynamicSharedMemory)
        );
        assert_eq!(
            offset_of!(KernelPrefix, name),
            offset_of!(CUpti_ActivityKernel10, name)
        );
        assert_eq!(
            offset_of!(CopyPrefix, bytes),
            offset_of!(CUpti_ActivityMemcpy5, bytes)
        );
        assert_eq!(
            offset_of!(CopyPrefix, src_kind),
            offset_of!(CUpti_ActivityMemcpy5, srcKind)
        );
        assert_eq!(
            offset_of!(CopyPrefix, stream_id),
            offset_of!(CUpti_ActivityMemcpy5, streamId)
        );
        assert_eq!(
            offset_of!(MemsetPrefix, end),
            offset_of!(CUpti_ActivityMemset4, end)
        );
        assert_eq!(
            offset_of!(MemsetPrefix, stream_id),
            offset_of!(CUpti_ActivityMemset4, streamId)
        );
        assert_eq!(
            offset_of!(MemsetPrefix, memory_kind),
            offset_of!(CUpti_ActivityMemset4, memoryKind)
        );
        assert!(size_of::<MemsetPrefix>() <= size_of::<CUpti_ActivityMemset4>());
        assert!(size_of::<KernelPrefix>() <= size_of::<CUpti_ActivityKernel10>());
        assert!(size_of::<CopyPrefix>() <= size_of::<CUpti_ActivityMemcpy5>());
    }

    #[test]
    fn a_kernel_record_laid_out_by_cuda_s_header_decodes() {
        let name = c"_Z17elementwise_kernelILi128ELi2EEviT1_";
        let mut raw = MaybeUninit::<CUpti_ActivityKernel10>::zeroed();
        let p = raw.as_mut_ptr();
        // SAFETY: writing fields of a zeroed record through raw pointers; zero is a valid value of every field.
        let record = unsafe {
            addr_of_mut!((*p).kind)
                .write(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            addr_of_mut!((*p).registersPerThread).write(32);
            addr_of_mut!((*p).start).write(1_000);
            addr_of_mut!((*p).end).write(3_500);
            addr_of_mut!((*p).streamId).write(7);
            addr_of_mut!((*p).gridX).write(1024);
            addr_of_mut!((*p).gridY).write(2);
            addr_of_mut!((*p).gridZ).write(1);
            addr_of_mut!((*p).blockX).write(128);
            addr_of_mut!((*p).blockY).write(1);
            addr_of_mut!((*p).blockZ).write(1);
            addr_of_mut!((*p).staticSharedMemory).write(256);
            addr_of_mut!((*p).dynamicSharedMemory).write(1024);
            addr_of_mut!((*p).name).write(name.as_ptr());
            raw.assume_init()
        };
        // SAFETY: a whole record of the newest layout.
        let Some(Activity::Kernel(k)) = (unsafe { decode((&raw const record).cast()) }) else {
            panic!("not decoded as a kernel");
        };
        assert_eq!(k.name, "_Z17elementwise_kernelILi128ELi2EEviT1_");
        assert_eq!((k.start_ns, k.end_ns, k.stream), (1_000, 3_500, 7));
        assert_eq!((k.grid, k.block), ([1024, 2, 1], [128, 1, 1]));
        assert_eq!(k.registers_per_thread, 32);
        assert_eq!((k.static_shared_bytes, k.dynamic_shared_bytes), (256, 1024));
    }

    #[test]
    fn a_pinned_host_to_device_copy_decodes() {
        let record = CUpti_ActivityMemcpy5 {
            kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
            copyKind: 1,
            srcKind: 2,
            dstKind: 3,
            flags: 1,
            bytes: 19_267_584,
            start: 10,
            end: 410,
            deviceId: 0,
            contextId: 1,
            streamId: 13,
            correlationId: 0,
            runtimeCorrelationId: 0,
            pad: 0,
            reserved0: std::ptr::null_mut(),
            graphNodeId: 0,
            graphId: 0,
            channelID: 0,
            channelType: cudarc::cupti::sys::CUpti_ChannelType::CUPTI_CHANNEL_TYPE_INVALID,
            pad2: 0,
        };
        // SAFETY: a whole record of the newest layout.
        let Some(Activity::Copy(c)) = (unsafe { decode((&raw const record).cast()) }) else {
            panic!("not decoded as a copy");
        };
        assert_eq!(
            (c.kind, c.src, c.dst),
            (
                CopyKind::HostToDevice,
                MemoryKind::Pinned,
                MemoryKind::Device
            )
        );
        assert_eq!(
            (c.bytes, c.start_ns, c.end_ns, c.stream),
            (19_267_584, 10, 410, 13)
        );
    }

    #[test]
    fn a_device_memset_decodes_as_memory_traffic() {
        let mut raw = MaybeUninit::<CUpti_ActivityMemset4>::zeroed();
        let p = raw.as_mut_ptr();
        // SAFETY: writing fields of a zeroed record through raw pointers; zero is a valid value of every field.
        let record = unsafe {
            addr_of_mut!((*p).kind).write(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET);
            addr_of_mut!((*p).bytes).write(4 << 20);
            addr_of_mut!((*p).start).write(2_000);
            addr_of_mut!((*p).end).write(2_600);
            addr_of_mut!((*p).streamId).write(7);
            addr_of_mut!((*p).memoryKind).write(3);
            raw.assume_init()
        };
        // SAFETY: a whole record of the newest layout.
        let Some(Activity::Copy(m)) = (unsafe { decode((&raw const record).cast()) }) else {
            panic!("not decoded as memory traffic");
        };
        assert_eq!((m.kind, m.dst), (CopyKind::Memset, MemoryKind::Device));
        assert_eq!(
            (m.bytes, m.start_ns, m.end_ns, m.stream),
            (4 << 20, 2_000, 2_600, 7)
        );
    }

    #[test]
    fn other_kinds_and_odd_values_are_harmless() {
        let overhead = [17u32, 0, 0, 0, 0, 0, 0, 0];
        // SAFETY: a record-sized buffer whose kind is OVERHEAD.
        assert!(unsafe { decode(overhead.as_ptr().cast()) }.is_none());
        assert_eq!(copy_kind(200), CopyKind::Other);
        assert_eq!(memory_kind(0), MemoryKind::Other);
    }
}
