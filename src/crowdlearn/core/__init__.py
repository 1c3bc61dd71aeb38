"""The core layer: the answer table (:mod:`.data`), the rules for ids, gold and classes every
answer table follows (:mod:`.ids`, :mod:`.gold`, :mod:`.classes`), readers and writers
(:mod:`.io`), and the crowd statistics and compiled loops every method is built from
(:mod:`.kernels`, :mod:`.compiled`).  Nothing here imports a method."""
