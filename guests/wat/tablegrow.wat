;; `tablegrow`: a hostile job that grows a table until the host refuses.
;;
;; Hand-written (Rust has no `table.grow`); scripts/build-guests.sh embeds
;; the `paddock:job/job` world and encodes it as a component. It grows its
;; funcref table 10,000 elements at a time until `table.grow` answers -1
;; (the host's limiter caps tables per attempt), then traps: the host must
;; classify it as its table limit, not as a guest bug.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "run") (result i32)
    (loop $grow
      (br_if $grow
        (i32.ne
          (table.grow $t (ref.null func) (i32.const 10000))
          (i32.const -1))))
    unreachable))
