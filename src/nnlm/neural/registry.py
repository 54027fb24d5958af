"""The networks of the family by name: what ``config.json``'s ``network`` field and the
presets refer to. Each entry is (config class, network class)."""

from __future__ import annotations

from dataclasses import fields

from .energy import EnergyConfig, EnergyNetwork
from .network import LBLConfig, LBLNetwork, Network, NetworkConfig, NPLMConfig, NPLMNetwork

NETWORKS: dict[str, tuple[type[NetworkConfig], type[Network]]] = {
    cfg.network_name: (cfg, net)
    for cfg, net in [(NPLMConfig, NPLMNetwork), (LBLConfig, LBLNetwork),
                     (EnergyConfig, EnergyNetwork)]
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


def build_network(config: NetworkConfig) -> Network:
    return NETWORKS[config.network_name][1](config)
