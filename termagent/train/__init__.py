"""Training stages (demos, SFT/warmup, DPO, GRPO, MT-GRPO): TRL + PEFT glue shared by all of them lives in
`termagent.train.common`; each trainer has its own module."""
