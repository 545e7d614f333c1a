"""Dynamic Resource Allocation (``resource.k8s.io``): devices from ResourceSlices, DeviceClasses and
claims with CEL selectors, and kube-scheduler's structured allocator. The scheduling rule is the
``dra`` plugin (:mod:`corral.plugins.dra`); this package keeps the books it works from."""

from corral.dra.allocator import Allocation, allocate
from corral.dra.inventory import ClaimRef, Inventory, build_inventory, resource_name
from corral.dra.records import ClaimAllocation

__all__ = [
    "Allocation",
    "ClaimAllocation",
    "ClaimRef",
    "Inventory",
    "allocate",
    "build_inventory",
    "resource_name",
]
