//! The typed device entry points without a GPU: operands of another element type than prepared
//! are `Error::ElementType` and a CPU preparation refuses every device product with
//! `Error::Unavailable`, each before the operands are touched (the stand-in device buffer
//! below fails the test if any of its methods runs).

use std::marker::PhantomData;
use std::sync::Arc;

use tcsparse::cudarc::driver::sys::CUdeviceptr;
use tcsparse::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use tcsparse::element::{bf16, f16};
use tcsparse::formats::csr::csr_from_triplets;
use tcsparse::{DType, Element, Engine, Error, PrepareOptions};

mod support;
use support::assert_element_type;

/// A device buffer of `T` that is never read: every method panics.
struct Untouched<T>(PhantomData<T>);

impl<T> Untouched<T> {
    fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> DeviceSlice<T> for Untouched<T> {
    fn len(&self) -> usize {
        panic!("the operand's length was read")
    }
    fn stream(&self) -> &Arc<CudaStream> {
        panic!("the operand's stream was read")
    }
}

impl<T> DevicePtr<T> for Untouched<T> {
    fn device_ptr<'a>(&'a self, _: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        panic!("the operand was read")
    }
}

impl<T> DevicePtrMut<T> for Untouched<T> {
    fn device_ptr_mut<'a>(&'a mut self, _: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        panic!("the operand was written")
    }
}

/// `spmm_device_typed` in `T` on a CPU preparation for `dtype`.
fn device_product<T: Element>(dtype: DType) -> Result<(), Error> {
    let a = csr_from_triplets(3, 3, &[(0, 0, 1.0), (1, 2, 2.0), (2, 1, -1.0)]).unwrap();
    let opts = PrepareOptions::builder().n(4).dtype(dtype).build();
    let mut p = Engine::cpu("half device tests")
        .prepare_spmm(&a, &opts)
        .unwrap();
    let (b, mut c) = (Untouched::<T>::new(), Untouched::<T>::new());
    p.spmm_device_typed(1.0, &b, 0.5, &mut c)
}

#[test]
fn operands_of_another_type_are_refused_by_both_names() {
    for prepared in DType::ALL {
        for got in DType::ALL {
            if got == prepared {
                continue;
            }
            let e = match got {
                DType::F32 => device_product::<f32>(prepared),
                DType::F16 => device_product::<f16>(prepared),
                _ => device_product::<bf16>(prepared),
            }
            .unwrap_err();
            assert_element_type(&e, prepared, got);
        }
    }
}

#[test]
fn a_cpu_preparation_refuses_device_products_in_every_type() {
    let results = [
        device_product::<f32>(DType::F32),
        device_product::<f16>(DType::F16),
        device_product::<bf16>(DType::BF16),
    ];
    for r in results {
        let e = r.unwrap_err();
        assert!(
            matches!(&e, Error::Unavailable(why) if why.contains("GPU")),
            "{e}"
        );
    }
}
