"""The networks of the family by name: what ``config.json``'s ``network`` field and the
presets refer to. Each entry is (config class, network class)."""

from __future__ import annotations

from dataclasses import fields

from ...base.errors import a
from ...base.sysmem import check_allocation
from .deep import DeepConfig, DeepNetwork
from .energy import EnergyConfig, EnergyNetwork
from .lstm import LSTMConfig, LSTMNetwork
from .network import LBLConfig, LBLNetwork, Network, NetworkConfig, NPLMConfig, NPLMNetwork

NETWORKS: dict[str, tuple[type[NetworkConfig], type[Network]]] = {
    cfg.network_name: (cfg, net)
    for cfg, net in [(NPLMConfig, NPLMNetwork), (LBLConfig, LBLNetwork),
                     (EnergyConfig, EnergyNetwork), (DeepConfig, DeepNetwork),
                     (LSTMConfig, LSTMNetwork)]
}


def network_config(settings: dict) -> NetworkConfig:
    """The config of a network from a dict (``network`` names the kind; default nplm)."""
    settings = dict(settings)
    name = settings.pop("network", "nplm")
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; choose from {', '.join(NETWORKS)}")
    cls = NETWORKS[name][0]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"settings {unknown} do not apply to the {name} network")
    return cls(**settings)


FLOAT_BYTES = 4  # parameters are float32


def build_network(config: NetworkConfig, copies: int = 1,
                  hint: str = "choose a smaller network") -> Network:
    """The network of ``config``, once its parameters are known to fit in memory: a
    config asking for more than the process can have (a mistyped m, an edited
    config.json) is refused in one line before torch allocates. ``copies``: how many
    parameter-sized tensors the caller will hold in all (training: the weights, their
    gradients and two optimizer moments)."""
    n = config.num_parameters()
    check_allocation(n * FLOAT_BYTES * copies,
                     f"{a(config.network_name)} network of {n:,} parameters"
                     + (" with its gradients and optimizer state" if copies > 1 else ""), hint)
    return NETWORKS[config.network_name][1](config)
