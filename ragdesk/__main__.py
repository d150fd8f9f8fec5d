from ragdesk.cli.main import main

raise SystemExit(main())
