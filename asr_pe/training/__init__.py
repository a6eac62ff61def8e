"""Lightning + Hydra wiring: data module, Lightning module, ``train(cfg)``, ``evaluate_run``.

Importing this package registers the OmegaConf resolver ``pe_label`` used by the configs
(``${pe_label:${pe}}`` → ``rope``, ``cape+rope``, …).
"""

from omegaconf import OmegaConf

from .run_dir import pe_label

if not OmegaConf.has_resolver("pe_label"):
    OmegaConf.register_new_resolver("pe_label", lambda pe: pe_label(pe))
