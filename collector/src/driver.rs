//! Device properties from the CUDA driver (libcuda is already loaded: the
//! driver loaded us). Looked up with dlsym, so nothing here can panic.

// The struct field each symbol is stored in fixes the transmute's target type.
#![allow(clippy::missing_transmute_annotations)]

use std::ffi::{c_char, c_int, c_void, CStr};

use streamscope_core::Device;

type Attr = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;

pub struct Driver {
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    attribute: Attr,
    name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
    total_mem: unsafe extern "C" fn(*mut usize, c_int) -> c_int,
    driver_version: unsafe extern "C" fn(*mut c_int) -> c_int,
}

macro_rules! sym {
    ($h:expr, $name:literal) => {{
        // SAFETY: dlsym on a live handle with a NUL-terminated name.
        let p = unsafe { libc::dlsym($h, $name.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the symbol is the CUDA driver function of that name with
        // the field's C signature (CUdevice and enums are int).
        unsafe { std::mem::transmute::<*mut c_void, _>(p) }
    }};
}

impl Driver {
    pub fn open() -> Option<Driver> {
        // SAFETY: dlopen of the driver library by its soname; kept open.
        let h =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        let h = if h.is_null() {
            // SAFETY: as above, loading it when it was not loaded yet.
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) }
        } else {
            h
        };
        if h.is_null() {
            return None;
        }
        Some(Driver {
            device_get: sym!(h, c"cuDeviceGet"),
            attribute: sym!(h, c"cuDeviceGetAttribute"),
            name: sym!(h, c"cuDeviceGetName"),
            total_mem: sym!(h, c"cuDeviceTotalMem_v2"),
            driver_version: sym!(h, c"cuDriverGetVersion"),
        })
    }

    pub fn version(&self) -> Option<i32> {
        let mut v = 0;
        // SAFETY: writes one int.
        (unsafe { (self.driver_version)(&mut v) } == 0).then_some(v)
    }

    /// "DOMAIN:BUS:DEVICE" (hex) of device `ordinal`: names the GPU the same
    /// way in every process of the host, whatever CUDA_VISIBLE_DEVICES says.
    pub fn pci_id(&self, ordinal: u32) -> Option<String> {
        let mut dev: c_int = 0;
        // SAFETY: writes one CUdevice.
        if unsafe { (self.device_get)(&mut dev, ordinal as c_int) } != 0 {
            return None;
        }
        let attr = |a: c_int| -> Option<c_int> {
            let mut v: c_int = 0;
            // SAFETY: writes one int.
            (unsafe { (self.attribute)(&mut v, a, dev) } == 0).then_some(v)
        };
        // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, _PCI_BUS_ID, _PCI_DEVICE_ID.
        Some(format!(
            "{:04x}:{:02x}:{:02x}",
            attr(50)?,
            attr(33)?,
            attr(34)?
        ))
    }

    /// Properties of device `ordinal` (fields left 0 when a query fails).
    pub fn device(&self, ordinal: u32) -> Device {
        let mut dev: c_int = 0;
        let mut d = Device {
            ordinal,
            ..Default::default()
        };
        // SAFETY: writes one CUdevice.
        if unsafe { (self.device_get)(&mut dev, ordinal as c_int) } != 0 {
            return d;
        }
        let attr = |a: c_int| -> u32 {
            let mut v: c_int = 0;
            // SAFETY: writes one int.
            let rc = unsafe { (self.attribute)(&mut v, a, dev) };
            if rc == 0 {
                v.max(0) as u32
            } else {
                0
            }
        };
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most len bytes, NUL-terminated.
        if unsafe { (self.name)(buf.as_mut_ptr(), buf.len() as c_int, dev) } == 0 {
            buf[buf.len() - 1] = 0;
            // SAFETY: NUL-terminated within the buffer.
            d.name = unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned();
        }
        let mut bytes = 0usize;
        // SAFETY: writes one size_t.
        if unsafe { (self.total_mem)(&mut bytes, dev) } == 0 {
            d.global_mem_bytes = bytes as u64;
        }
        d.compute_major = attr(75);
        d.compute_minor = attr(76);
        d.sm_count = attr(16);
        d.warp_size = attr(10);
        d.max_threads_per_block = attr(1);
        d.max_threads_per_sm = attr(39);
        d.max_blocks_per_sm = attr(106);
        d.regs_per_sm = attr(82);
        d.regs_per_block = attr(12);
        d.smem_per_sm_bytes = u64::from(attr(81));
        let optin = attr(97);
        d.smem_per_block_bytes = u64::from(if optin > 0 { optin } else { attr(8) });
        d
    }
}
