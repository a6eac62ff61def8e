"""Lightning + Hydra wiring: data module, Lightning module, ``train(cfg)``, the corpus located by Hydra.

Importing this package registers the OmegaConf resolver ``pe_label`` used by the configs
(``${pe_label:${pe}}`` → ``rope``, ``cape+rope``, …) and ``hydra_output_subdir`` (where Hydra
records a start's config in the run folder).
"""

from omegaconf import OmegaConf

from asr_pe.run_folder import pe_label

from .hydra_job import output_subdir

if not OmegaConf.has_resolver("pe_label"):
    OmegaConf.register_new_resolver("pe_label", lambda pe: pe_label(pe))
if not OmegaConf.has_resolver("hydra_output_subdir"):
    OmegaConf.register_new_resolver("hydra_output_subdir", output_subdir)
