from gitpub.cli.entry import main

raise SystemExit(main())
