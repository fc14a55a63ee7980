# zsh -f zsh_complete.zsh FPATH_DIR OUTFILE "command line": completes the line once (a real
# interactive zsh in a pseudo-terminal, compinit, zsh's own _git), writes the edited $BUFFER.
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "cap () { zle complete-word; print -r -- \"\$BUFFER\" > $2; }; zle -N cap; bindkey '^T' cap"
zpty -w -n z "$3"$'\x14'
for i in {1..100}; do [[ -s $2 ]] && break; sleep 0.05; done
zpty -d z
