"""``deviceshare``: Volcano's device-sharing plugin (``plugins/deviceshare``) read onto corral's GPU
sharing (:mod:`corral.plugins.gpushare`).

Volcano's arguments and what corral does with each:

- ``deviceshare.GPUSharingEnable`` (default false): true is Volcano's GPU sharing by memory — a pod's
  ``volcano.sh/gpu-memory`` request must fit on one device of the node (devices from
  ``volcano.sh/gpu-number``, memory per device the node's ``volcano.sh/gpu-memory`` over its devices):
  the same rule as corral's ``gpushare``, which then does the work (its device bookkeeping and dry
  runs included). False: the plugin checks nothing, as in Volcano.
- ``deviceshare.NodeLockEnable``: Volcano locks a node by annotation while a device plugin binds;
  that orders binds in flight and changes no placement — accepted, no effect.
- ``deviceshare.SchedulePolicy``, ``deviceshare.ScheduleWeight``: a node score from the devices;
  Volcano's GPU-sharing devices score every node 0 (only vGPU devices score), so with GPU sharing they
  change nothing — accepted, no effect.
- Refused, by name, when true or set: ``deviceshare.GPUNumberEnable`` (whole devices counted per device
  by ``volcano.sh/gpu-number``: corral counts only the node total), ``deviceshare.VGPUEnable`` (HAMi
  vGPU), ``deviceshare.ASCEND310PVNPUEnable`` (Ascend vNPU), ``deviceshare.GPUExclusiveRules`` and
  ``deviceshare.GPUExclusiveVGPUResourceName`` (vGPU exclusivity): corral does not model those devices.
  GPUSharingEnable and GPUNumberEnable together are refused as Volcano refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.errors import ConfigError
from corral.framework.config import arg
from corral.plugins.gpushare import GpuSharePlugin

__all__ = ["DeviceShareArgs", "DeviceSharePlugin"]

_INERT = "accepted, no effect (docs/plugins.md)"

#: argument -> why corral refuses it when true or set
_REFUSED = {
    "gpu_number": (
        "deviceshare.GPUNumberEnable",
        "corral does not assign whole devices by volcano.sh/gpu-number (it checks only the node's total); "
        "request nvidia.com/gpu, or set it false",
    ),
    "vgpu": ("deviceshare.VGPUEnable", "corral does not model HAMi vGPU devices; set it false"),
    "ascend": ("deviceshare.ASCEND310PVNPUEnable", "corral does not model Ascend vNPU devices; set it false"),
    "exclusive_rules": (
        "deviceshare.GPUExclusiveRules",
        "vGPU exclusivity rules: corral does not model vGPU devices; remove it",
    ),
    "exclusive_vgpu": (
        "deviceshare.GPUExclusiveVGPUResourceName",
        "vGPU exclusivity: corral does not model vGPU devices; remove it",
    ),
}


@dataclass(frozen=True)
class DeviceShareArgs:
    gpu_sharing: bool = arg("deviceshare.GPUSharingEnable", False, "GPU sharing by memory (gpushare's rule)")
    gpu_number: bool = arg("deviceshare.GPUNumberEnable", False, "refused when true")
    node_lock: bool = arg("deviceshare.NodeLockEnable", False, _INERT)
    vgpu: bool = arg("deviceshare.VGPUEnable", False, "refused when true")
    ascend: bool = arg("deviceshare.ASCEND310PVNPUEnable", False, "refused when true")
    policy: str = arg("deviceshare.SchedulePolicy", "", _INERT)
    weight: int = arg("deviceshare.ScheduleWeight", 0, _INERT)
    exclusive_rules: str = arg("deviceshare.GPUExclusiveRules", "", "refused when set")
    exclusive_vgpu: str = arg("deviceshare.GPUExclusiveVGPUResourceName", "", "refused when set")
    #: corral's own (gpushare's seed-003 switch), not a Volcano argument: always the device it had
    keep_device: bool = True

    def __post_init__(self) -> None:
        for attr, (key, why) in _REFUSED.items():
            if getattr(self, attr):
                raise ConfigError(f"{key} is not served: {why}", field=key)
        if self.gpu_sharing and self.gpu_number:
            raise ConfigError(
                "GPUSharingEnable and GPUNumberEnable cannot both be true (Volcano refuses it too)",
                field="deviceshare.GPUNumberEnable",
            )


class DeviceSharePlugin(GpuSharePlugin):
    """GPU sharing by memory when ``deviceshare.GPUSharingEnable`` is true; else nothing."""

    name = "deviceshare"
    Args = DeviceShareArgs  # type: ignore[assignment]  # gpushare's fields and Volcano's keys

    def on_session_open(self) -> None:
        super().on_session_open()
        if not self.args.gpu_sharing:
            self.col = None  # as with no pod asking for GPU memory: every pod passes, nothing is written
