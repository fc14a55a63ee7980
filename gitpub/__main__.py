from gitpub.cli import main

raise SystemExit(main())
