"""Type stubs of the Rust extension ``tcsparse._tcsparse`` (use the ``tcsparse`` package instead)."""

from typing import Any, Dict, Optional, Tuple, overload

import numpy as np
import numpy.typing as npt

__version__: str

class _Matrix:
    """A sparse matrix prepared once for many products."""

    def __init__(
        self,
        rows: int,
        cols: int,
        indptr: npt.NDArray[np.int64],
        indices: npt.NDArray[np.int64],
        data: npt.NDArray[np.float32],
        device: Optional[int],
        n_hint: int,
        precision: str,
        tune: bool,
    ) -> None: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def nnz(self) -> int: ...
    @property
    def device(self) -> Optional[int]: ...
    @property
    def precision(self) -> str: ...
    @property
    def kernel(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def freed(self) -> bool: ...
    def indptr(self) -> npt.NDArray[np.int64]: ...
    def indices(self) -> npt.NDArray[np.int64]: ...
    def values(self) -> npt.NDArray[np.float32]: ...
    def free(self) -> None: ...
    def spmm(
        self,
        alpha: float,
        b: npt.NDArray[np.float32],
        beta: float,
        c: npt.NDArray[np.float32],
        transpose: bool = False,
    ) -> None: ...
    @overload
    def sddmm(
        self, left: npt.NDArray[np.float32], right: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def sddmm(
        self, left: npt.NDArray[np.float64], right: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]: ...
    def spmm_f64(
        self, values: npt.NDArray[np.float64], b: npt.NDArray[np.float64], transpose: bool = False
    ) -> npt.NDArray[np.float64]: ...
    def update_values(self, values: npt.NDArray[np.float32]) -> None: ...
    def spmm_cuda(
        self,
        alpha: float,
        b: int,
        n: int,
        beta: float,
        c: int,
        stream: int,
        transpose: bool = False,
    ) -> None: ...
    def time_spmm_cuda(self, b: int, n: int, c: int, stream: int, iters: int) -> float: ...
    def sddmm_cuda(self, left: int, right: int, k: int, out: int, stream: int) -> None: ...

def spamm(
    a: npt.NDArray[np.float32],
    b: npt.NDArray[np.float32],
    tau: Optional[float] = None,
    rel_error: Optional[float] = None,
    valid_ratio: Optional[float] = None,
    device: str = "auto",
) -> Tuple[npt.NDArray[np.float32], Dict[str, Any]]: ...
def cuda_available() -> bool: ...
def _panic_for_test() -> None: ...
